/* <cuda_gl_interop.h> of the CUDA toolkit, for polypy: OpenGL interoperability is not translated.
 * A program may include this header (Rodinia hybridsort does, and uses none of it); a call of
 * any of its functions is refused where it is made, by name. The toolkit's header includes
 * <GL/gl.h> for GLuint and GLenum; this one declares the functions without them, so that a
 * machine without OpenGL headers can still translate a program that only includes it. */
#ifndef POLYPY_CUDA_GL_INTEROP_H
#define POLYPY_CUDA_GL_INTEROP_H
#include <cuda_runtime.h>
#define POLYPY_GL_REFUSED(what) __attribute__((unavailable(what " is not supported by polypy (OpenGL interoperability)")))
enum cudaGLDeviceList { cudaGLDeviceListAll = 1, cudaGLDeviceListCurrentFrame = 2, cudaGLDeviceListNextFrame = 3 };
enum cudaGLMapFlags { cudaGLMapFlagsNone = 0, cudaGLMapFlagsReadOnly = 1, cudaGLMapFlagsWriteDiscard = 2 };
cudaError_t cudaGLGetDevices(...) POLYPY_GL_REFUSED("cudaGLGetDevices");
cudaError_t cudaGLSetGLDevice(...) POLYPY_GL_REFUSED("cudaGLSetGLDevice");
cudaError_t cudaGraphicsGLRegisterImage(...) POLYPY_GL_REFUSED("cudaGraphicsGLRegisterImage");
cudaError_t cudaGraphicsGLRegisterBuffer(...) POLYPY_GL_REFUSED("cudaGraphicsGLRegisterBuffer");
cudaError_t cudaGLRegisterBufferObject(...) POLYPY_GL_REFUSED("cudaGLRegisterBufferObject");
cudaError_t cudaGLUnregisterBufferObject(...) POLYPY_GL_REFUSED("cudaGLUnregisterBufferObject");
cudaError_t cudaGLMapBufferObject(...) POLYPY_GL_REFUSED("cudaGLMapBufferObject");
cudaError_t cudaGLUnmapBufferObject(...) POLYPY_GL_REFUSED("cudaGLUnmapBufferObject");
cudaError_t cudaGLMapBufferObjectAsync(...) POLYPY_GL_REFUSED("cudaGLMapBufferObjectAsync");
cudaError_t cudaGLUnmapBufferObjectAsync(...) POLYPY_GL_REFUSED("cudaGLUnmapBufferObjectAsync");
cudaError_t cudaGLSetBufferObjectMapFlags(...) POLYPY_GL_REFUSED("cudaGLSetBufferObjectMapFlags");
#endif
