// The P3O advantage, one block per env. The maths is docs/algorithm.md, "The advantage".
//
//   y[t, j]  the per-offset lambda-return of the reward j steps after decision t (fixed-horizon TD(lambda)):
//              y[t, 0] = rewards[t]
//              y[t, j] = (1 - lam) mu[t + 1, j - 1] + lam y[t + 1, j - 1]   (j >= 1, t's episode runs at t + 1)
//              y[t, j] = 0                                                  (j >= 1, step t ended the episode)
//              y[T, j] = mu[T, j] = tail_mu[n, j], the predictions at the bootstrap state
//            At the offsets with tied[j] != 0 (the action measurably moves that reward) the target is the reward
//            itself, r[t, j], as lam = 1 gives it: r[t, 0] = rewards[t], r[t, j] = r[t + 1, j - 1] while the episode
//            runs, 0 after its terminal, r[T, j] = tail_mu[n, j] past the rollout's end.
//   A[t, n]  = sum_j omega[j] * (target[t, n, j] - mu[t, n, j]) / max_j omega[j], omega[j] = 1 / sigma[j]^2
//
// Block n walks its env's decisions from t = T - 1 down to 0 with one thread per offset j (blockDim: the power of
// two at or above H, at most P3O_MAX_H). Thread j reads mu[t, n, j], so a step's reads are one contiguous row, and
// takes y[t + 1, j - 1], r[t + 1, j - 1] and mu[t + 1, n, j - 1] from thread j - 1 through shared memory (two
// buffers, one per parity of t). The block sums the weighted residuals of decision t in a shared tree. mu is read
// once, and nothing but the advantages is written. sigma is clamped to [e^-10, e^10], the range training keeps
// log_sigma in, so sigma = 0 gives large but finite weights instead of inf - inf = NaN. Arrays are contiguous
// float32: rewards, terminals [T, N]; mu [T, N, H]; sigma, tied [H]; tail_mu [N, H]; advantages [T, N]. The same
// source builds for the CPU with kernels/host_shim.h.

#define P3O_MAX_H 1024

extern "C" __global__ void p3o_advantage(
    const float* __restrict__ rewards, const float* __restrict__ terminals, const float* __restrict__ mu,
    const float* __restrict__ sigma, const float* __restrict__ tail_mu, const float* __restrict__ tied,
    const float lam, const int T, const int N, const int H, float* __restrict__ advantages)
{
    __shared__ float ys[2][P3O_MAX_H], raws[2][P3O_MAX_H], mus[2][P3O_MAX_H], sums[P3O_MAX_H];
    const int n = blockIdx.x, j = threadIdx.x;
    const bool on = j < H;  // the threads past H only pad the tree

    // omega[j] and its largest value, by the tree
    const float min_sigma = 4.539993e-05f;  // e^-10
    const float max_sigma = 2.202646e+04f;  // e^10
    const float s = on ? fminf(fmaxf(sigma[j], min_sigma), max_sigma) : 1.0f;
    const float omega = on ? 1.0f / (s * s) : 0.0f;
    sums[j] = omega;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (j < half) sums[j] = fmaxf(sums[j], sums[j + half]);
        __syncthreads();
    }
    const float norm = sums[0];
    const bool tied_here = on && tied[j] != 0.0f;

    // t = T: the bootstrap predictions stand for y, r and mu
    if (on) ys[T & 1][j] = raws[T & 1][j] = mus[T & 1][j] = tail_mu[(long long)n * H + j];
    float next_mu = on && T > 0 ? mu[((long long)(T - 1) * N + n) * H + j] : 0.0f;
    __syncthreads();
    for (int t = T - 1; t >= 0; --t) {
        const int now = t & 1, later = now ^ 1;
        const float m = next_mu;
        if (on && t > 0) next_mu = mu[((long long)(t - 1) * N + n) * H + j];  // the next step's row, read early
        float residual = 0.0f;
        if (on) {
            const float reward = rewards[(long long)t * N + n];
            const bool ended = terminals[(long long)t * N + n] != 0.0f;  // step t ended t's episode: nothing after
            const float y = j == 0 ? reward : ended ? 0.0f : (1.0f - lam) * mus[later][j - 1] + lam * ys[later][j - 1];
            const float raw = j == 0 ? reward : ended ? 0.0f : raws[later][j - 1];
            ys[now][j] = y;
            raws[now][j] = raw;
            mus[now][j] = m;
            residual = omega * ((tied_here ? raw : y) - m);
        }
        sums[j] = residual;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (j < half) sums[j] += sums[j + half];
            __syncthreads();
        }
        if (j == 0) advantages[(long long)t * N + n] = sums[0] / norm;
        __syncthreads();  // sums is rewritten by the next step
    }
}
