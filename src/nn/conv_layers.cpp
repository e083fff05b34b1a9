// Image layers: convolution, pooling, flatten and the row reshape they start from. Images are
// NHWC [batch, height, width, channels].
#include "stepgraph/nn.h"

namespace sg {

namespace {

// The input of an image layer: rank 4, plain values (no jets). Says what to do otherwise.
const Shape& image_input(GraphBuilder& g, TensorId x, const char* layer, const std::string& prefix) {
  SG_REQUIRE(!g.jet(), layer, " layer '", prefix, "' cannot be used in a physics-informed (jet) model");
  const Shape& xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 4, layer, " layer '", prefix,
             "' expects NHWC images [batch, height, width, channels], got ", shape_str(xs),
             xs.size() == 2 ? "; give the model an input_shape (e.g. [8, 8, 1]) to view feature rows as images" : "");
  return xs;
}

std::string base_name(const std::string& prefix, const char* fallback) { return prefix.empty() ? fallback : prefix; }

}  // namespace

TensorId reshape_rows(GraphBuilder& g, TensorId x, const Shape& per_sample, const std::string& name) {
  SG_REQUIRE(!g.jet(), "reshape '", name, "' cannot be used in a physics-informed (jet) model");
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(!xs.empty() && numel(xs) == xs[0] * numel(per_sample), "reshape '", name, "': ", shape_str(xs),
             " cannot be viewed as [batch] + ", shape_str(per_sample));
  Shape ys{xs[0]};
  ys.insert(ys.end(), per_sample.begin(), per_sample.end());
  TensorId y = g.tensor(name, ys, Role::Activation);
  Op op;
  op.kind = OpKind::Reshape;
  op.name = name + ".reshape";
  op.in = {x};
  op.out = {y};
  g.program().add_op(std::move(op));
  return y;
}

Conv2d::Conv2d(int64_t filters, Conv2dOptions options) : filters_(filters), o_(std::move(options)) {
  SG_REQUIRE(filters > 0, "conv2d: filters must be positive, got ", filters);
  SG_REQUIRE(o_.kernel > 0, "conv2d: kernel must be positive, got ", o_.kernel);
  SG_REQUIRE(o_.stride > 0, "conv2d: stride must be positive, got ", o_.stride);
  SG_REQUIRE(o_.dilation > 0, "conv2d: dilation must be positive, got ", o_.dilation);
  SG_REQUIRE(o_.padding >= 0, "conv2d: padding must be >= 0, got ", o_.padding);
  for (int64_t v : {o_.kernel, o_.stride, o_.dilation, o_.padding})
    SG_REQUIRE(v <= (int64_t{1} << 20), "conv2d: kernel, stride, padding and dilation must be at most 2^20, got ", v);
  SG_REQUIRE(o_.act == Activation::None || o_.act == Activation::ReLU, "conv2d: activation must be none or relu, got ",
             activation_name(o_.act));
  init_ = o_.init ? *o_.init : (o_.act == Activation::ReLU ? Init::he() : Init::xavier());
  SG_REQUIRE(init_.kind != Init::Kind::Normal || init_.std > 0, "conv2d: normal init needs std > 0, got ", init_.std);
}

TensorId Conv2d::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape xs = image_input(g, x, "conv2d", prefix);
  const int64_t C = xs[3], R = o_.kernel;
  ConvAttrs a;
  a.pad_h = a.pad_w = static_cast<int32_t>(o_.padding);
  a.stride_h = a.stride_w = static_cast<int32_t>(o_.stride);
  a.dil_h = a.dil_w = static_cast<int32_t>(o_.dilation);
  a.act = o_.act;
  const int64_t P = conv_output_size(xs[1], R, o_.padding, o_.stride, o_.dilation);
  const int64_t Q = conv_output_size(xs[2], R, o_.padding, o_.stride, o_.dilation);
  SG_REQUIRE(P > 0 && Q > 0, "conv2d layer '", prefix, "': a ", R, "x", R, " kernel with dilation ", o_.dilation,
             " and padding ", o_.padding, " does not fit its ", xs[1], "x", xs[2], " input ", shape_str(xs));
  TensorId W = g.parameter(this, "weight", join_name(prefix, "weight"), {filters_, R, R, C}, init_, R * R * C,
                           R * R * filters_);
  TensorId b = o_.bias ? g.parameter(this, "bias", join_name(prefix, "bias"), {filters_}, Init::zeros(), R * R * C,
                                     R * R * filters_)
                       : kNone;
  const std::string base = base_name(prefix, "conv2d");
  TensorId Y = g.tensor(base + ".out", {xs[0], P, Q, filters_}, Role::Activation);
  Op op;
  op.kind = OpKind::Conv2d;
  op.name = base + ".conv2d";
  op.in = {x, W, b};
  op.out = {Y};
  op.attrs = a;
  g.program().add_op(std::move(op));
  return Y;
}

std::string Conv2d::describe() const {
  return cat("conv2d(", filters_, ", ", o_.kernel, "x", o_.kernel, ", stride ", o_.stride, ", padding ", o_.padding,
             ", dilation ", o_.dilation, ", ", activation_name(o_.act), ", init=", init_.str(),
             o_.bias ? ", bias)" : ", no bias)");
}

MaxPool2d::MaxPool2d(int64_t window, std::optional<int64_t> stride, int64_t padding)
    : window_(window), stride_(stride ? *stride : window), padding_(padding) {
  SG_REQUIRE(window_ > 0 && window_ <= (int64_t{1} << 20), "max_pool2d: window must be in [1, 2^20], got ", window_);
  SG_REQUIRE(stride_ > 0 && stride_ <= (int64_t{1} << 20), "max_pool2d: stride must be in [1, 2^20], got ", stride_);
  SG_REQUIRE(padding_ >= 0 && 2 * padding_ <= window_, "max_pool2d: padding must be in [0, window / 2] = [0, ",
             window_ / 2, "], got ", padding_);
}

TensorId MaxPool2d::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape xs = image_input(g, x, "max_pool2d", prefix);
  const int64_t P = conv_output_size(xs[1], window_, padding_, stride_);
  const int64_t Q = conv_output_size(xs[2], window_, padding_, stride_);
  SG_REQUIRE(P > 0 && Q > 0, "max_pool2d layer '", prefix, "': a ", window_, "x", window_,
             " window does not fit its input ", shape_str(xs));
  PoolAttrs a;
  a.window_h = a.window_w = static_cast<int32_t>(window_);
  a.stride_h = a.stride_w = static_cast<int32_t>(stride_);
  a.pad_h = a.pad_w = static_cast<int32_t>(padding_);
  const std::string base = base_name(prefix, "max_pool2d");
  TensorId Y = g.tensor(base + ".out", {xs[0], P, Q, xs[3]}, Role::Activation);
  Op op;
  op.kind = OpKind::MaxPool2d;
  op.name = base + ".max_pool2d";
  op.in = {x};
  op.out = {Y};
  op.attrs = a;
  g.program().add_op(std::move(op));
  return Y;
}

std::string MaxPool2d::describe() const {
  return cat("max_pool2d(", window_, "x", window_, ", stride ", stride_, ", padding ", padding_, ")");
}

TensorId GlobalAvgPool::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape xs = image_input(g, x, "global_avg_pool", prefix);
  const std::string base = base_name(prefix, "global_avg_pool");
  TensorId Y = g.tensor(base + ".out", {xs[0], xs[3]}, Role::Activation);
  Op op;
  op.kind = OpKind::GlobalAvgPool;
  op.name = base + ".global_avg_pool";
  op.in = {x};
  op.out = {Y};
  g.program().add_op(std::move(op));
  return Y;
}

TensorId Flatten::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() >= 2, "flatten layer '", prefix, "' expects a [batch, ...] input, got ", shape_str(xs));
  if (xs.size() == 2) return x;
  return reshape_rows(g, x, {numel(xs) / xs[0]}, base_name(prefix, "flatten") + ".out");
}

std::shared_ptr<Conv2d> conv2d(int64_t filters, Conv2dOptions options) {
  return std::make_shared<Conv2d>(filters, std::move(options));
}
std::shared_ptr<MaxPool2d> max_pool2d(int64_t window, std::optional<int64_t> stride, int64_t padding) {
  return std::make_shared<MaxPool2d>(window, stride, padding);
}
std::shared_ptr<GlobalAvgPool> global_avg_pool() { return std::make_shared<GlobalAvgPool>(); }
std::shared_ptr<Flatten> flatten() { return std::make_shared<Flatten>(); }

}  // namespace sg
