// A user-defined op from outside stepgraph: the snake activation y = x + sin(x)^2 (Ziyin et al.,
// 2020), registered with its CPU reference here and its CUDA kernels in snake.cu, then trained
// in a Sequential and in a model graph. On the CPU always; on the GPU too when there is one, where
// its kernels are captured into the step's CUDA graph and the losses must match the CPU's.
// Exits 1 when training does not learn or the devices disagree.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

#include "stepgraph/custom_op.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"

#ifdef SNAKE_CUDA
void snake_forward_cuda(const float* x, float* y, int64_t n, void* stream);
void snake_backward_cuda(const float* dy, const float* x, float* dx, int64_t n, void* stream);
#endif

namespace {

void register_snake() {
  sg::CustomOpDef d;
  d.name = "snake";
  d.output_shapes = [](const std::vector<sg::Shape>& in) {
    if (in.size() != 1) throw sg::Error("snake takes one input");
    return std::vector<sg::Shape>{in[0]};
  };
  d.cpu = [](const sg::CustomOpArgs& a) {
    for (int64_t i = 0; i < sg::numel(a.in_shapes[0]); ++i) {
      const float s = std::sin(a.in[0][i]);
      a.out[0][i] = a.in[0][i] + s * s;
    }
  };
  d.cpu_backward = [](const sg::CustomOpArgs& a) {  // in: dY, X, Y; out: dX (null when not needed)
    if (!a.out[0]) return;
    for (int64_t i = 0; i < sg::numel(a.in_shapes[1]); ++i) a.out[0][i] = a.in[0][i] * (1 + std::sin(2 * a.in[1][i]));
  };
#ifdef SNAKE_CUDA
  d.cuda = [](const sg::CustomOpArgs& a) { snake_forward_cuda(a.in[0], a.out[0], sg::numel(a.in_shapes[0]), a.stream); };
  d.cuda_backward = [](const sg::CustomOpArgs& a) {
    if (a.out[0]) snake_backward_cuda(a.in[0], a.in[1], a.out[0], sg::numel(a.in_shapes[1]), a.stream);
  };
#endif
  sg::register_op(d);
}

// y = sin(3 x0) + x1^2 on [-1, 1]^2.
void make_data(int64_t n, sg::HostArray& X, sg::HostArray& Y) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(2 * n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[2 * i] = u(rng);
    x[2 * i + 1] = u(rng);
    y[i] = std::sin(3 * x[2 * i]) + x[2 * i + 1] * x[2 * i + 1];
  }
  X = sg::HostArray::f32({n, 2}, x);
  Y = sg::HostArray::f32({n, 1}, y);
}

// The losses of `steps` full-batch Adam steps.
std::vector<float> train(sg::LayerPtr model, sg::Device dev, const sg::HostArray& X, const sg::HostArray& Y, int steps) {
  sg::Trainer t(std::move(model), std::make_shared<sg::MeanSquaredError>(), std::make_shared<sg::Adam>(1e-2), dev, 0);
  t.compile(X.shape());
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(t.one_step(X, Y));
  return losses;
}

}  // namespace

int main() {
  using namespace sg;
  try {
    register_snake();
    auto sequential_model = [] {
      return sequential({dense(32), custom_layer("snake"), dense(32), custom_layer("snake"), dense(1)});
    };
    auto graph_model = [] {
      auto x = Input({2}, "x");
      auto h = custom("snake", {call(dense(32), x)}, "snake1")[0];
      return std::make_shared<Model>(std::vector<SymbolicTensor>{x}, call(dense(1), h));
    };
    HostArray X, Y;
    make_data(256, X, Y);
    int failures = 0;
    const std::vector<float> cpu = train(sequential_model(), Device::CPU, X, Y, 300);
    std::cout << "cpu sequential: loss " << cpu.front() << " -> " << cpu.back() << "\n";
    if (!(cpu.back() < 0.1f * cpu.front())) ++failures;
    const std::vector<float> graph = train(graph_model(), Device::CPU, X, Y, 300);
    std::cout << "cpu model graph: loss " << graph.front() << " -> " << graph.back() << "\n";
    if (!(graph.back() < 0.1f * graph.front())) ++failures;

    std::string note;
    if (choose_device("auto", &note) != Device::CUDA) {
      std::cout << note << "\n";
    } else {
#ifdef SNAKE_CUDA
      const std::vector<float> gpu = train(sequential_model(), Device::CUDA, X, Y, 300);
      double worst = 0;
      for (size_t s = 0; s < 20; ++s) worst = std::max(worst, std::fabs(double(gpu[s]) - cpu[s]) / std::fabs(cpu[s]));
      std::cout << "cuda sequential (one CUDA graph per step): loss " << gpu.front() << " -> " << gpu.back()
                << ", first 20 losses within " << worst << " of the CPU's\n";
      if (!(worst < 1e-4) || !(gpu.back() < 0.1f * gpu.front())) ++failures;
#else
      std::cout << "this stepgraph has no CUDA backend: the snake kernels are not built\n";
#endif
    }
    return failures == 0 ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "snake_op: " << e.what() << "\n";
    return 1;
  }
}
