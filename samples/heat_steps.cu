// heat_steps: per-thread explicit time stepping of a small damped oscillator, `steps` steps of
// size dt, the number of steps a kernel argument (known only at launch). Each thread integrates
//     a' = -k a + sin(b),   b' = a
// from a = u0[i], b = 0 with forward Euler and writes a + b.
// Exercises: a loop whose trip count is a run-time argument carrying two registers (gradients:
// recomputation from the loop entry, tapes sized at launch, or binomial checkpointing).
#ifndef REAL
#define REAL float
#endif

__global__ void heat_steps(const REAL* u0, const REAL* k, REAL* u, int n, int steps, REAL dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    REAL a = u0[i];
    REAL b = (REAL)0;
    REAL kk = k[i];
    for (int s = 0; s < steps; ++s) {
        REAL f = -kk * a + sin(b);
        b = b + dt * a;
        a = a + dt * f;
    }
    u[i] = a + b;
}
