// particles: a pointer to a user struct (const Particle*) and a struct passed by value whose
// members are a float4 pointer, a float pointer and an int, in a whole program.
//   momentum:  out[i] = (m vx, m vy, m vz, m) for particle i           Particle* in, float4* out
//   norms:     v.dst[i] = |v.src[i]|^2 (all four components)            struct View by value
// Regression for issue 10 item 4 (struct pointers in whole-program launchers).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

struct Particle {
    float vx, vy, vz;
    float m;
};

struct View {
    const float4* src;
    float* dst;
    int n;
};

__global__ void momentum(const Particle* ps, float4* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Particle p = ps[i];
        out[i] = make_float4(p.m * p.vx, p.m * p.vy, p.m * p.vz, p.m);
    }
}

__global__ void norms(View v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < v.n) {
        float4 a = v.src[i];
        v.dst[i] = a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
}

int main()
{
    const int n = 777;
    Particle* hp = (Particle*)malloc(n * sizeof(Particle));
    for (int i = 0; i < n; ++i) {
        hp[i].vx = (float)(i % 9) - 4.0f;
        hp[i].vy = 0.5f * (float)(i % 6);
        hp[i].vz = 1.0f - 0.25f * (float)(i % 8);
        hp[i].m = 1.0f + (float)(i % 3);
    }
    Particle* dp;
    float4* dm;
    float* dn;
    cudaMalloc((void**)&dp, n * sizeof(Particle));
    cudaMalloc((void**)&dm, n * sizeof(float4));
    cudaMalloc((void**)&dn, n * sizeof(float));
    cudaMemcpy(dp, hp, n * sizeof(Particle), cudaMemcpyHostToDevice);

    momentum<<<(n + 127) / 128, 128>>>(dp, dm, n);
    View view;
    view.src = dm;
    view.dst = dn;
    view.n = n;
    norms<<<(n + 31) / 32, 32>>>(view);

    float4* hm = (float4*)malloc(n * sizeof(float4));
    float* hn = (float*)malloc(n * sizeof(float));
    cudaMemcpy(hm, dm, n * sizeof(float4), cudaMemcpyDeviceToHost);
    cudaMemcpy(hn, dn, n * sizeof(float), cudaMemcpyDeviceToHost);
    double px = 0.0, py = 0.0, pz = 0.0, mass = 0.0, sn = 0.0;
    for (int i = 0; i < n; ++i) {
        px += hm[i].x; py += hm[i].y; pz += hm[i].z; mass += hm[i].w;
        sn += hn[i];
    }
    printf("momentum: %.3f %.3f %.3f mass %.3f\n", px, py, pz, mass);
    printf("norms: %.3f n[5] = %.4f n[776] = %.4f\n", sn, hn[5], hn[776]);
    cudaFree(dp); cudaFree(dm); cudaFree(dn);
    free(hp); free(hm); free(hn);
    return 0;
}
