// The DeepONet antiderivative set (data.h): a random smooth function u, its values at the
// sensors, query points y and G(u)(y) = integral of u from 0 to y, in closed form.
#include <cmath>

#include "stepgraph/data.h"
#include "stepgraph/rng.h"

namespace sg {

NamedArrays make_antiderivative(int64_t functions, int64_t sensors, int64_t points, uint64_t seed) {
  SG_REQUIRE(functions > 0 && points > 0, "make_antiderivative: functions and points must be positive, got ",
             functions, " and ", points);
  SG_REQUIRE(sensors >= 2, "make_antiderivative: sensors must be at least 2 (the ends of [0, 1]), got ", sensors);
  constexpr int kModes = 4;
  const double two_pi = 2.0 * M_PI;
  const int64_t N = functions * points;
  HostArray U(DType::F32, {N, sensors}), Y(DType::F32, {N, 1}), G(DType::F32, {N, 1});
  Rng coef_rng(mix_seed(seed, "antiderivative.u")), y_rng(mix_seed(seed, "antiderivative.y"));
  for (int64_t f = 0; f < functions; ++f) {
    double c = coef_rng.normal(), a[kModes], b[kModes];
    for (int k = 0; k < kModes; ++k) a[k] = coef_rng.normal(), b[k] = coef_rng.normal();
    auto u = [&](double x) {
      double v = c;
      for (int k = 1; k <= kModes; ++k) v += (a[k - 1] * std::cos(two_pi * k * x) + b[k - 1] * std::sin(two_pi * k * x)) / k;
      return v;
    };
    auto integral = [&](double y) {  // of u from 0 to y
      double v = c * y;
      for (int k = 1; k <= kModes; ++k) {
        const double w = two_pi * k;
        v += (a[k - 1] * std::sin(w * y) + b[k - 1] * (1.0 - std::cos(w * y))) / (w * k);
      }
      return v;
    };
    std::vector<float> at_sensors(static_cast<size_t>(sensors));
    for (int64_t j = 0; j < sensors; ++j)
      at_sensors[j] = static_cast<float>(u(static_cast<double>(j) / static_cast<double>(sensors - 1)));
    for (int64_t p = 0; p < points; ++p) {
      const int64_t row = f * points + p;
      std::copy(at_sensors.begin(), at_sensors.end(), U.data<float>() + row * sensors);
      const float y = static_cast<float>(y_rng.uniform());
      Y.data<float>()[row] = y;
      G.data<float>()[row] = static_cast<float>(integral(y));  // at the stored f32 y
    }
  }
  return {{"u", std::move(U)}, {"y", std::move(Y)}, {"G", std::move(G)}};
}

}  // namespace sg
