/* Declarations shared by link_util.cu (host code only, no kernel) and link_main.cu. */
#ifndef LINK_UTIL_H
#define LINK_UTIL_H
extern int util_calls;
int check_error(const char* where);
float* upload(const float* host, int n);
void release(float* device);
#endif
