// Trains an MLP on the embedded digits with the installed library, on the GPU when there is one,
// and exits 1 below 90% validation accuracy (CI builds and runs it against `cmake --install`).
#include <iostream>

#include "stepgraph/data.h"
#include "stepgraph/graph.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"

int main() {
  using namespace sg;
  try {
    auto [train, val] = train_val_split(load_digits(), 0.2, /*seed=*/0);
    auto model = sequential({dense(128, Activation::ReLU), dense(10)});
    std::string note;
    const Device dev = choose_device("auto", &note);
    if (!note.empty()) std::cout << note << "\n";
    Trainer t(model, std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<Adam>(1e-3), dev, /*seed=*/0);
    t.compile({64, train.features()});
    BatchSampler sampler(train.size(), 64, /*shuffle=*/true, /*seed=*/0);
    float loss = 0;
    for (int64_t s = 0; s < 400; ++s) {
      Dataset b = gather(train, sampler.indices(s));
      loss = t.one_step(b.X, b.y);
    }
    const EvalResult r = t.evaluate(val.X, val.y);
    std::cout << "device " << device_name(dev) << ", loss " << loss << ", validation accuracy " << r.accuracy << "\n";
    return r.accuracy >= 0.9 ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "train_digits: " << e.what() << "\n";
    return 1;
  }
}
