// nbody_step: one explicit (semi-implicit Euler) step of an all-pairs gravitational n-body system.
// pos[i] = (x, y, z, mass), vel[i] = (vx, vy, vz, unused); G = 1, softening eps2:
//
//   a_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps2)^(3/2)
//   new_vel_i = vel_i + dt * a_i,   new_pos_i = pos_i + dt * new_vel_i   (w copied)
//
// Exercises: float4 loads/stores, make_float4 and .x/.y/.z/.w, rsqrtf, a loop over tiles of bodies
// staged through __shared__ memory with two barriers per tile; threads past n still help load
// tiles (padding bodies have zero mass), so the barriers are reached by every thread.
// blockDim.x must be <= MAX_BLOCK.
#define MAX_BLOCK 256

__global__ void nbody_step(const float4* pos, const float4* vel, float4* new_pos, float4* new_vel,
                           int n, float dt, float eps2)
{
    __shared__ float4 tile[MAX_BLOCK];

    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 p = (i < n) ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;

    for (int base = 0; base < n; base += blockDim.x) {
        int j = base + threadIdx.x;
        tile[threadIdx.x] = (j < n) ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
        for (int k = 0; k < blockDim.x; ++k) {
            float4 q = tile[k];
            float dx = q.x - p.x;
            float dy = q.y - p.y;
            float dz = q.z - p.z;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float inv_r = rsqrtf(r2);
            float s = q.w * inv_r * inv_r * inv_r;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        __syncthreads();
    }

    if (i < n) {
        float4 v = vel[i];
        v.x += ax * dt;
        v.y += ay * dt;
        v.z += az * dt;
        new_vel[i] = v;
        new_pos[i] = make_float4(p.x + v.x * dt, p.y + v.y * dt, p.z + v.z * dt, p.w);
    }
}
