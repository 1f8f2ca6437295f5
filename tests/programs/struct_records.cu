// Pointers to records of mixed member types in device memory (Rodinia b+tree `knode`, lavaMD
// `box_str`, streamcluster `Point`): int/bool/long/float members, an int array member indexed by
// the thread, a nested array of records, a pointer member the kernels never read, and whole
// records copied between buffers.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define ORDER 8

struct Neighbor { int x, y; long offset; };

struct Node {
    int location;
    int keys[ORDER];
    bool is_leaf;
    int num_keys;
    long total;
    float weight;
    float* coord;          // a host pointer in the copied records: never read on the device
    Neighbor nei[3];
};

// One block per node, one thread per key: keys below the threshold counted, the leaf flag and
// the weight updated, the total accumulated from the neighbours' offsets.
__global__ void visit(Node* nodes, const int* order, int threshold, int* counts) {
    int b = order[blockIdx.x];
    int t = threadIdx.x;
    __shared__ int below[ORDER];
    below[t] = (t < nodes[b].num_keys && nodes[b].keys[t] < threshold) ? 1 : 0;
    __syncthreads();
    if (t == 0) {
        int c = 0;
        for (int i = 0; i < ORDER; i++) c += below[i];
        counts[blockIdx.x] = c;
        Node* n = &nodes[b];
        n->is_leaf = c == 0;
        n->weight = n->weight * 0.5f + (float)c;
        long s = 0;
        for (int k = 0; k < 3; k++) s += n->nei[k].offset * (long)(n->nei[k].x - n->nei[k].y);
        n->total = s;
    }
}

__global__ void copy_nodes(const Node* src, Node* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Neighbor first = src[i].nei[0];
        dst[n - 1 - i].location = src[i].location + first.x;
        dst[n - 1 - i].num_keys = src[i].num_keys;
        dst[n - 1 - i].weight = src[i].weight;
        dst[n - 1 - i].nei[2] = first;
    }
}

int main() {
    const int n = 37;
    Node* h = (Node*)calloc(n, sizeof(Node));
    int* h_order = (int*)malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) {
        h[i].location = 100 * i;
        h[i].num_keys = 1 + i % ORDER;
        for (int k = 0; k < ORDER; k++) h[i].keys[k] = (i * 7 + k * 13) % 50;
        h[i].is_leaf = true;
        h[i].weight = (float)(i % 5);
        h[i].coord = 0;
        for (int k = 0; k < 3; k++) {
            h[i].nei[k].x = i + k;
            h[i].nei[k].y = 2 * k;
            h[i].nei[k].offset = 1000L * k + i;
        }
        h_order[i] = (i * 11) % n;
    }
    Node *d_nodes, *d_copy;
    int *d_order, *d_counts;
    cudaMalloc((void**)&d_nodes, n * sizeof(Node));
    cudaMalloc((void**)&d_copy, n * sizeof(Node));
    cudaMalloc((void**)&d_order, n * sizeof(int));
    cudaMalloc((void**)&d_counts, n * sizeof(int));
    cudaMemcpy(d_nodes, h, n * sizeof(Node), cudaMemcpyHostToDevice);
    cudaMemcpy(d_copy, h, n * sizeof(Node), cudaMemcpyHostToDevice);
    cudaMemcpy(d_order, h_order, n * sizeof(int), cudaMemcpyHostToDevice);
    visit<<<n, ORDER>>>(d_nodes, d_order, 20, d_counts);
    copy_nodes<<<(n + 15) / 16, 16>>>(d_nodes, d_copy, n);
    int* counts = (int*)malloc(n * sizeof(int));
    cudaMemcpy(counts, d_counts, n * sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, d_copy, n * sizeof(Node), cudaMemcpyDeviceToHost);
    long csum = 0;
    for (int i = 0; i < n; i++) csum += (long)counts[i] * (i + 1);
    printf("counts %ld c[0] %d c[5] %d\n", csum, counts[0], counts[5]);
    double w = 0.0;
    long loc = 0, off = 0;
    for (int i = 0; i < n; i++) { w += h[i].weight; loc += h[i].location; off += h[i].nei[2].offset + h[i].nei[2].x; }
    printf("copy: weight %.2f location %ld nei %ld keys[3] %d\n", w, loc, off, h[3].num_keys);
    Node* back = (Node*)malloc(n * sizeof(Node));
    cudaMemcpy(back, d_nodes, n * sizeof(Node), cudaMemcpyDeviceToHost);
    long total = 0;
    int leaves = 0;
    for (int i = 0; i < n; i++) { total += back[i].total; leaves += back[i].is_leaf ? 1 : 0; }
    printf("nodes: total %ld leaves %d\n", total, leaves);
    return 0;
}
