/* nbody_step: one semi-implicit Euler step of all-pairs gravity (G = 1, softening eps2)
 * (samples/nbody_step.cu). pos/vel/new_pos/new_vel hold n float4 bodies as 4n floats
 * (x, y, z, w); pos.w is the mass, vel.w is copied.
 *
 *   void nbody_step_omp(const float *pos, const float *vel, float *new_pos, float *new_vel,
 *                       int n, float dt, float eps2);
 *
 * The CPU form of "stage tiles of bodies in shared memory": copy the positions once into
 * structure-of-arrays form (O(n) work against O(n^2) interactions), so that the inner loop over
 * bodies j runs on unit-stride vectors; threads share out the bodies i.
 */
#include <math.h>
#include <stdlib.h>

void nbody_step_omp(const float *restrict pos, const float *restrict vel, float *restrict new_pos,
                    float *restrict new_vel, int n, float dt, float eps2)
{
    float *soa = malloc(4 * (size_t)n * sizeof(float));
    if (soa == NULL)
        abort();
    float *restrict px = soa, *restrict py = soa + n, *restrict pz = soa + 2 * (size_t)n;
    float *restrict pm = soa + 3 * (size_t)n;

#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int j = 0; j < n; ++j) {
            px[j] = pos[4 * (long)j];
            py[j] = pos[4 * (long)j + 1];
            pz[j] = pos[4 * (long)j + 2];
            pm[j] = pos[4 * (long)j + 3];
        }
        /* implicit barrier: the SoA copy is complete before anyone reads it */
#pragma omp for schedule(static)
        for (int i = 0; i < n; ++i) {
            float xi = px[i], yi = py[i], zi = pz[i];
            float ax = 0.0f, ay = 0.0f, az = 0.0f;
#pragma omp simd reduction(+ : ax, ay, az)
            for (int j = 0; j < n; ++j) {
                float dx = px[j] - xi, dy = py[j] - yi, dz = pz[j] - zi;
                float r2 = dx * dx + dy * dy + dz * dz + eps2;
                float inv_r = 1.0f / sqrtf(r2);
                float s = pm[j] * inv_r * inv_r * inv_r;
                ax += dx * s;
                ay += dy * s;
                az += dz * s;
            }
            const float *v = vel + 4 * (long)i;
            float vx = v[0] + ax * dt, vy = v[1] + ay * dt, vz = v[2] + az * dt;
            float *nv = new_vel + 4 * (long)i, *np = new_pos + 4 * (long)i;
            nv[0] = vx;
            nv[1] = vy;
            nv[2] = vz;
            nv[3] = v[3];
            np[0] = xi + vx * dt;
            np[1] = yi + vy * dt;
            np[2] = zi + vz * dt;
            np[3] = pm[i];
        }
    }
    free(soa);
}
