// The tests' user-defined ops (custom_op.h), registered once per process:
//   test_cube: y = x^3, dx = 3 x^2 dy; CPU kernels, and CUDA ones when the tests have a CUDA
//              compiler (custom_test_ops.cu), counting their launcher calls;
//   test_mix:  two inputs, two outputs: (a b, a + 2 b); CPU only;
//   test_nograd: y = 2 x without a backward;
//   test_syncs: y = x whose CUDA forward synchronizes its stream (refused inside a capture);
//   test_log_cosh: a user loss, the mean over valid rows' elements of log(cosh(pred - target)),
//              CPU and (with a CUDA compiler) CUDA kernels.
// Their float64 references (for the op-table cases) are test_op_reference below.
#pragma once

#include <algorithm>
#include <atomic>
#include <vector>

#include <cmath>

#include "stepgraph/custom_loss.h"
#include "stepgraph/custom_op.h"

namespace sg::test {

#ifdef SG_TEST_CUSTOM_CUDA
void cube_cuda(const float* x, float* y, int64_t n, void* stream);
void cube_backward_cuda(const float* dy, const float* x, float* dx, int64_t n, void* stream);
void copy_then_sync_cuda(const float* x, float* y, int64_t n, void* stream);
void log_cosh_cuda(const LossArgs& a);
#endif

inline std::atomic<int>& cube_cuda_calls() {
  static std::atomic<int> n{0};
  return n;
}

inline bool test_ops_have_cuda() {
#ifdef SG_TEST_CUSTOM_CUDA
  return true;
#else
  return false;
#endif
}

inline void register_test_loss() {
  if (is_registered_loss("test_log_cosh")) return;
  CustomLossDef d;
  d.name = "test_log_cosh";
  d.cpu = [](const LossArgs& a) {
    const int64_t B = a.pred_shape[0], per = numel(a.pred_shape) / B, rows = a.valid_rows ? *a.valid_rows : B;
    double sum = 0;
    for (int64_t i = 0; i < B * per; ++i) {
      const double e = static_cast<double>(a.pred[i]) - a.target[i];
      const bool pad = i / per >= rows;
      if (!pad) sum += std::log(std::cosh(e));
      a.dpred[i] = pad ? 0.0f : static_cast<float>(std::tanh(e) / static_cast<double>(rows * per));
    }
    *a.loss = static_cast<float>(sum / static_cast<double>(rows * per));
  };
#ifdef SG_TEST_CUSTOM_CUDA
  d.cuda = log_cosh_cuda;
#endif
  register_loss(d);
}

inline void register_test_ops() {
  register_test_loss();
  if (is_registered_op("test_cube")) return;
  auto same = [](const std::vector<Shape>& in) { return std::vector<Shape>{in[0]}; };
  CustomOpDef cube;
  cube.name = "test_cube";
  cube.output_shapes = same;
  cube.cpu = [](const CustomOpArgs& a) {
    for (int64_t i = 0; i < numel(a.in_shapes[0]); ++i) a.out[0][i] = a.in[0][i] * a.in[0][i] * a.in[0][i];
  };
  cube.cpu_backward = [](const CustomOpArgs& a) {  // in: dY, X, Y
    if (!a.out[0]) return;
    for (int64_t i = 0; i < numel(a.in_shapes[1]); ++i) a.out[0][i] = 3 * a.in[1][i] * a.in[1][i] * a.in[0][i];
  };
#ifdef SG_TEST_CUSTOM_CUDA
  cube.cuda = [](const CustomOpArgs& a) {
    ++cube_cuda_calls();
    cube_cuda(a.in[0], a.out[0], numel(a.in_shapes[0]), a.stream);
  };
  cube.cuda_backward = [](const CustomOpArgs& a) {
    ++cube_cuda_calls();
    if (a.out[0]) cube_backward_cuda(a.in[0], a.in[1], a.out[0], numel(a.in_shapes[1]), a.stream);
  };
#endif
  register_op(cube);

  CustomOpDef mix;
  mix.name = "test_mix";
  mix.output_shapes = [](const std::vector<Shape>& in) {
    SG_REQUIRE(in.size() == 2 && in[0] == in[1], "test_mix takes two inputs of one shape, got ", in.size());
    return std::vector<Shape>{in[0], in[0]};
  };
  mix.cpu = [](const CustomOpArgs& a) {
    for (int64_t i = 0; i < numel(a.in_shapes[0]); ++i) {
      a.out[0][i] = a.in[0][i] * a.in[1][i];
      a.out[1][i] = a.in[0][i] + 2 * a.in[1][i];
    }
  };
  mix.cpu_backward = [](const CustomOpArgs& a) {  // in: dP, dS, A, B, P, S; out: dA, dB
    for (int64_t i = 0; i < numel(a.in_shapes[2]); ++i) {
      const float dp = a.in[0][i], ds = a.in[1][i], x = a.in[2][i], y = a.in[3][i];
      if (a.out[0]) a.out[0][i] = dp * y + ds;
      if (a.out[1]) a.out[1][i] = dp * x + 2 * ds;
    }
  };
  register_op(mix);

  CustomOpDef nograd;
  nograd.name = "test_nograd";
  nograd.output_shapes = same;
  nograd.cpu = [](const CustomOpArgs& a) {
    for (int64_t i = 0; i < numel(a.in_shapes[0]); ++i) a.out[0][i] = 2 * a.in[0][i];
  };
  register_op(nograd);

#ifdef SG_TEST_CUSTOM_CUDA
  // A CUDA forward that synchronizes: what graph capture refuses.
  CustomOpDef syncs;
  syncs.name = "test_syncs";
  syncs.output_shapes = same;
  syncs.cpu = [](const CustomOpArgs& a) { std::copy(a.in[0], a.in[0] + numel(a.in_shapes[0]), a.out[0]); };
  syncs.cuda = [](const CustomOpArgs& a) { copy_then_sync_cuda(a.in[0], a.out[0], numel(a.in_shapes[0]), a.stream); };
  register_op(syncs);
#endif
}

// The float64 forward of a test op: outputs from inputs, element by element.
inline std::vector<std::vector<double>> test_op_reference(const std::string& op, const std::vector<std::vector<double>>& in) {
  std::vector<std::vector<double>> out;
  if (op == "test_cube") {
    out.emplace_back();
    for (double x : in[0]) out[0].push_back(x * x * x);
  } else if (op == "test_mix") {
    out.resize(2);
    for (size_t i = 0; i < in[0].size(); ++i) {
      out[0].push_back(in[0][i] * in[1][i]);
      out[1].push_back(in[0][i] + 2 * in[1][i]);
    }
  } else {
    out.emplace_back();
    for (double x : in[0]) out[0].push_back(2 * x);
  }
  return out;
}

}  // namespace sg::test
