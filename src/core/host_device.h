// SG_HD marks small functions shared by the CPU reference and CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define SG_HD __host__ __device__ inline
#else
#define SG_HD inline
#endif
