/* The device heap (docs/device_heap.md): the memory of device malloc/free/new/delete. One
 * allocation of the runtime's (so the pools of pointers a later launch reads from memory find it,
 * frontend/lower/held_pointers.py), made at the first launch of a kernel that uses the heap, of
 * the size cudaLimitMallocHeapSize says then (8 MiB unless set; cudaDeviceSetLimit refuses to
 * change it afterwards, as CUDA does), plus the allocator's 32 bytes (the C prelude's
 * polypy_atomic_malloc_u64). It lives until the program ends: a block one launch allocates can be
 * used and freed by later launches. */
POLYPY_RT_STATE unsigned long long** polypy_rt_heap(void) { static unsigned long long* h = 0; return &h; }

/* A launcher's view of the heap as elements of `align` bytes: its address and length. A heap the
 * host cannot make stops the program (a GPU fails the launch with cudaErrorMemoryAllocation). */
static inline void polypy_rt_heap_pool(void** pool, unsigned long long* extent, size_t align) {
  unsigned long long* h = __atomic_load_n(polypy_rt_heap(), __ATOMIC_ACQUIRE);
  if (!h) {
    polypy_rt_locked lock;
    h = *polypy_rt_heap();
    if (!h) {
      size_t bytes = (polypy_rt_limits()[cudaLimitMallocHeapSize] + 15) / 16 * 16 + 32;
      void* p = 0;
      if (polypy_rt_malloc_unlocked(&p, bytes) != cudaSuccess) {
        fflush(stdout);
        fprintf(stderr, "error: polypy cannot make the device heap of %lu bytes (cudaLimitMallocHeapSize)\n",
                (unsigned long)bytes);
        exit(1);
      }
      h = (unsigned long long*)p;
      h[0] = bytes;  /* the allocator's words, then one free block of the rest */
      h[1] = 0;
      h[2] = 32;
      h[3] = 0;
      h[4] = bytes - 32;
      h[5] = 0;
      *polypy_rt_heap_made() = 1;
      __atomic_store_n(polypy_rt_heap(), h, __ATOMIC_RELEASE);
    }
  }
  *pool = h;
  *extent = h[0] / align;
}
