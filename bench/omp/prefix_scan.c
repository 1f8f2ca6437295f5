/* prefix_scan: inclusive scan of each `segment`-long piece of in (one CUDA block each):
 * out[i] = sum of in[j] from the start of i's segment up to i, for i < n; block_sums[b] = total
 * of segment b, elements past n counting as zero (samples/prefix_scan.cu; there
 * segment = blockDim.x and nsegments = gridDim.x).
 *
 *   void prefix_scan_omp(const float *in, float *out, float *block_sums, int n, int segment,
 *                        int nsegments);
 *
 * Segments are independent: threads share them out and scan each one sequentially, which is
 * O(segment) work instead of the O(segment log segment) of a Hillis-Steele scan.
 */
void prefix_scan_omp(const float *restrict in, float *restrict out, float *restrict block_sums,
                     int n, int segment, int nsegments)
{
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nsegments; ++b) {
        long start = (long)b * segment;
        long end = start + segment < n ? start + segment : n;
        float acc = 0.0f;
        for (long i = start; i < end; ++i) {
            acc += in[i];
            out[i] = acc;
        }
        block_sums[b] = acc;
    }
}
