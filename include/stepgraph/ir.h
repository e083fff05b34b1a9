// The program IR: tensors with roles, and coarse ops with attributes. A whole training step
// (forward, loss, backward, optimizer) is one Program; backends lower each op to one kernel or
// library call.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "stepgraph/core.h"

namespace sg {

namespace pinn {
struct Expression;
}

using TensorId = int32_t;
constexpr TensorId kNone = -1;  // an absent optional input or output

// What a tensor is for. Persistent roles live for the trainer's whole life at a fixed address
// (the graph records pointers); the rest are planned per step by liveness.
enum class Role : uint8_t {
  Parameter,       // trained weights
  Gradient,        // d loss / d parameter (persistent: the optimizer and all-reduce read them)
  OptimizerState,  // momentum, Adam moments
  StepScalar,      // step counter, learning rate, bias corrections, hyperparameters
  Constant,        // fixed model tensors (a frozen Fourier matrix): like parameters, not trained
  Input,           // a fixed input slot (batch X, labels): written between steps, never reused
  Activation,      // forward values (layer outputs, pre-activations kept for backward)
  Temporary,       // backward values (activation gradients), loss gradient
};
const char* role_name(Role r);
bool is_persistent(Role r);  // Parameter, Gradient, OptimizerState, StepScalar

struct TensorInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  Role role = Role::Activation;
  bool live_out = false;  // read after the step (loss, logits): never reused within the step
};

// The math of each is src/backend/activation_math.h. leaky_relu and elu take a parameter (the
// negative slope, 0.01; alpha, 1.0): a dense layer uses the default, the Activation op its attribute.
// GELU is the tanh approximation (PyTorch's gelu(approximate="tanh"), cuBLASLt's epilogue; also
// spelled "gelu_tanh"); GELUErf the exact form 0.5 z (1 + erf(z / sqrt 2)), PyTorch's default F.gelu.
enum class Activation : uint8_t { None, ReLU, GELU, Tanh, Sigmoid, Sin, Softplus, SiLU, LeakyReLU, ELU, Exp, Square,
                                  GELUErf };
const char* activation_name(Activation a);
Activation parse_activation(const std::string& s);  // throws listing the allowed names
// Every activation's name, in enum order (the Python stubs are checked against it).
std::vector<std::string> activation_names();
// Whether the activation's derivative is computed from the pre-activation z (gelu, sin, softplus,
// silu, square) rather than from the output y (relu, tanh, sigmoid, leaky_relu, elu, exp): decides
// which tensor backward keeps.
bool activation_needs_preact(Activation a);

enum class Reduction : uint8_t { Mean, Sum };
const char* reduction_name(Reduction r);

enum class OpKind : uint8_t {
  // A batch from a device-resident data set: rows perm_e(pos) of every data array (an X and a y,
  // or a graph model's arrays by name), where step s (the step counter before this step) is batch
  // s % batches_per_epoch of epoch e = s / batches_per_epoch and perm_e the keyed Feistel
  // permutation (src/data/feistel.h). valid_rows < B on a padded last batch (partial mode).
  GatherBatch,          // in {step i32[1], data_k[N,...]...}  out {valid i32[1], batch_k[B,...]...}
  // Jets (physics-informed networks): tensors of K*B rows, see JetSpec.
  JetInput,             // in {X[B,d]}            out {J[K*B,d]}   value X, d/dx_i = e_i, second = 0
  JetActivation,        // in {A[K*B,H]}          out {Y[K*B,H]}   Y = act(A) as jets
  JetActivationBackward,  // in {dY, A}           out {dA}
  FourierFeatures,      // in {P[K*B,m]}          out {F[K*B,2m]}  F = [sin 2 pi P, cos 2 pi P] as jets
  FourierFeaturesBackward,  // in {dF, P}         out {dP}
  // One loss term of a physics-informed problem: weight * mean over points of r^2, r an
  // expression over the points' coordinates X [M,d] and the components of the output jet U
  // [K*M,O]; writes d loss / dU, adds the term to the total loss (accumulate; total may be absent)
  // and keeps it alone.
  ExpressionLoss,       // in {U[K*M,O], X[M,d]}  out {total[1]|-, term[1], dU[K*M,O]}
  // Collocation points drawn on the device: uniform in the box (or on one face of it), redrawn
  // every `every` steps from (seed, step / every); every = 0 draws once (step 0's points).
  SamplePoints,         // in {step i32[1]}       out {X[M,d]}
  // Observed points of a physics-informed data term (an inverse problem's measurements): the
  // table of ObservedAttrs, rows (coordinates, values), written as X (the coordinates, the
  // network's input) and XV (the whole rows, which the term's expression loss reads: its
  // values as coordinates d, d+1, ...). The same every step.
  ObservedPoints,       // in {}                  out {X[N,d], XV[N,d+k]}
  // Dense also takes X [B, ..., I] (each row of the leading dimensions: sequences of tokens).
  Dense,                // in {X[B,I], W[O,I], b[O]|-}  out {Y[B,O], Z[B,O]|-}   Y = act(X W^T + b)
  DenseBackward,        // in {dY, X, W, Y, Z|-}        out {dX|-, dW, db|-}
  Add,                  // in {A, B}                     out {Y}                  Y = A + B (broadcasts: see Sub)
  AddBackward,          // in {dY}                       out {dA|-, dB|-}
  // Losses: rows >= valid_rows (an i32 [1] input, optional) are padding: no loss, no gradient,
  // and a mean divides by the valid count. That is how a padded last batch trains exactly.
  // Cross-entropy also takes logits [B, ..., C] with labels [B, ...] (per token); valid then
  // counts batch rows B. A mean divides by the counted labels.
  SoftmaxCrossEntropy,  // in {logits[B,C], labels i32[B], valid|-}  out {loss[1], dlogits[B,C]}
  MeanSquaredError,     // in {pred[B,T], target[B,T], valid|-}      out {loss[1], dpred[B,T]}
  // step += 1, then lr. With the loss (and the clipped gradients' norm) it also watches them:
  // watch = {first step whose value was NaN or inf, how many such steps} (train.on_nan).
  Schedule,             // in {step i32[1], hyper[2], loss[1]|-, norm[2]|-}  out {step, sched[5], watch i32[2]|-}
  SgdUpdate,            // in {hyper, sched, P..., G..., M...}  out {P..., M...}   in place
  AdamUpdate,           // in {hyper, sched, P..., G..., M..., V...}  out {P..., M..., V...}
  // Images are NHWC (channels last); filters KRSC (cuDNN's filter layout for NHWC): both keep
  // the channels contiguous. Output size per dimension: see conv_output_size.
  // Y[n,p,q,k] = act(b[k] + sum_{r,s,c} X[n, p*sh - ph + r*dh, q*sw - pw + s*dw, c] W[k,r,s,c]),
  // act none or relu; taps outside the image read zero.
  Conv2d,               // in {X[N,H,W,C], W[K,R,S,C], b[K]|-}  out {Y[N,P,Q,K]}
  Conv2dBackward,       // in {dY, X, W, Y}                     out {dX|-, dW, db|-}  (relu' from Y)
  // Max over each window (padding never wins). Backward routes each dY to the first maximum of
  // its window in scan order (r, then s); Y is read as cuDNN's pooling backward does.
  MaxPool2d,            // in {X[N,H,W,C]}          out {Y[N,P,Q,C]}
  MaxPool2dBackward,    // in {dY, X, Y}            out {dX}
  GlobalAvgPool,        // in {X[N,H,W,C]}          out {Y[N,C]}      mean over H and W
  GlobalAvgPoolBackward,  // in {dY[N,C]}           out {dX[N,H,W,C]}
  // The same elements in another shape (flatten, an image view of feature rows): a copy, since
  // every tensor has its own place in the plan. Backward is a reshape back (accumulating).
  Reshape,              // in {X}                   out {Y}   numel(X) == numel(Y)
  // Sequence models: token tensors are [B, S, E] (batch, position, feature).
  // Layer norm over the last dimension E of R = numel / E rows; mean and rstd = 1 / sqrt(var +
  // eps) per row are kept for backward.
  LayerNorm,            // in {X[..., E], gamma[E], beta[E]}   out {Y[..., E], mean[R], rstd[R]}
  LayerNormBackward,    // in {dY, X, gamma, mean, rstd}      out {dX|-, dgamma, dbeta}
  // Y[b,s,:] = table[ids[b,s], :] + pos[s, :]. Ids are i32, or f32 holding integers (batches
  // are f32 feature rows); each must be in [0, V) (the CPU reference checks). pos: [P >= S, E].
  Embedding,            // in {ids[B,S], table[V,E], pos[P,E]|-}  out {Y[B,S,E]}
  EmbeddingBackward,    // in {dY, ids}                           out {dtable|-, dpos|-}   (scatter-add)
  // Scaled dot-product attention over H heads. Q, K, V, O are [B, S, H*D] (BSHD: head h is
  // columns [h*D, (h+1)*D)). O = softmax(scale Q K^T (+ causal mask: key j > query i is
  // excluded)) V per batch and head; L [B, H, S] keeps each row's log-sum-exp of the scaled,
  // masked scores, from which backward recomputes the probabilities.
  Attention,            // in {Q, K, V}               out {O, L[B,H,S]}
  AttentionBackward,    // in {dO, Q, K, V, O, L}     out {dQ|-, dK|-, dV|-}
  // A statistic of a forward tensor, no gradient: max |X| over all elements (the activation
  // range FP8 scaling needs), written every step.
  AbsMax,               // in {X}                     out {amax[1]}
  // Tensor ops (the building blocks of model graphs: several inputs and outputs, products of
  // branches, concatenated skips). Elementwise binary ops, and Add above, broadcast: A, B and Y
  // have one rank, and per axis the sizes are equal or one of them is 1 (Y has the larger); the
  // gradient of a broadcast operand sums over its broadcast axes.
  Sub,                  // in {A, B}                  out {Y}     Y = A - B
  SubBackward,          // in {dY}                    out {dA|-, dB|-}
  Mul,                  // in {A, B}                  out {Y}     Y = A * B
  MulBackward,          // in {dY, A, B}              out {dA|-, dB|-}
  Div,                  // in {A, B}                  out {Y}     Y = A / B
  DivBackward,          // in {dY, A, B}              out {dA|-, dB|-}
  // Y = a X + b (ScaleShiftAttrs); its backward is a ScaleShift too (dX = a dY).
  ScaleShift,           // in {X}                     out {Y}
  // Y = act(X) elementwise (ActivationAttrs); backward reads X or Y as activation_needs_preact says.
  Activation,           // in {X}                     out {Y}
  ActivationBackward,   // in {dY, X, Y}              out {dX}
  // Along a feature axis (ConcatAttrs/SplitAttrs/SliceAttrs::axis: 1 .. rank-1, or negative from
  // the end; the batch axis 0 is refused). Concat's backward is a Split (pieces that need no
  // gradient absent); Split's is SplitBackward, a concat where absent pieces read as zeros.
  Concat,               // in {X...}                  out {Y}
  Split,                // in {X}                     out {Y|-...}  Y_k = X[.., offset_k : offset_k + sizes[k], ..]
  SplitBackward,        // in {dY|-...}               out {dX}
  Slice,                // in {X}                     out {Y}     Y = X[.., begin:end, ..]
  SliceBackward,        // in {dY}                    out {dX}    dY in [begin, end), zero elsewhere
  // Over one feature axis (ReduceAttrs): Y drops it, or keeps it as size 1 (keepdims).
  Sum,                  // in {X}                     out {Y}
  SumBackward,          // in {dY}                    out {dX}
  Mean,                 // in {X}                     out {Y}
  MeanBackward,         // in {dY}                    out {dX}
  // An elementwise loss of pred against f32 targets of its shape (LossAttrs::form: l1, huber,
  // bce_with_logits), with its gradient, the valid-row rule and the reduction of MSE.
  PointwiseLoss,        // in {pred[B,T], target[B,T], valid|-}      out {loss[1], dpred[B,T]}
  // Y = X * mask / (1 - p), the mask keyed by (DropoutAttrs::key, step, element): see
  // backend/dropout_math.h. Its backward is a Dropout of dY with the same attributes. Built only
  // in training steps (predict and evaluate leave it out).
  Dropout,              // in {X, step i32[1]}          out {Y}
  // Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_): n = sqrt(sum of every
  // G's squares), then every G *= min(1, max_norm / (n + 1e-6)) in place; norm = {n, factor}.
  ClipGradNorm,         // in {G...}                    out {norm[2], G...}
  // Batched matrix products between activations (MatMulAttrs): Y[b] = op(A[b]) op(B[b]) for
  // every index b of the leading axes (the batch axis and any others, the same for A and B),
  // op(X) = X or its transpose over the last two axes. The backward is two more MatMuls.
  MatMul,               // in {A[..., M, K], B[..., K, N]}  out {Y[..., M, N]}
  // Y = X with two feature axes swapped (TransposeAttrs); the backward is the same swap.
  Transpose,            // in {X}                       out {Y}
  // Batch norm over the channels C = the last dimension (features [B, C], NHWC images [B, H, W,
  // C]): statistics per channel over the n = numel / C rows, as torch.nn.BatchNorm1d/2d. The
  // training form normalises with the batch's mean and biased variance (mean and rstd = 1 /
  // sqrt(var + eps) kept for backward) and updates the running statistics in place (outputs 3
  // and 4 are inputs 3 and 4): rm = (1 - m) rm + m mean, rv = (1 - m) rv + m var n / (n - 1).
  BatchNorm,            // in {X[..., C], gamma[C], beta[C], rm[C], rv[C]}  out {Y, mean[C], rstd[C], rm, rv}
  BatchNormBackward,    // in {dY, X, gamma, mean, rstd}                   out {dX|-, dgamma|-, dbeta|-}
  // Predict and evaluate: Y = (X - rm) / sqrt(rv + eps) * gamma + beta, no gradient.
  BatchNormInference,   // in {X[..., C], gamma[C], beta[C], rm[C], rv[C]}  out {Y}
  // A user-defined op (custom_op.h): its kernels, shapes and backward from the registry entry
  // CustomAttrs::id. The backward is the same kind with backward = true.
  Custom,               // in {X...}  out {Y...};  backward: in {dY..., X..., Y...}  out {dX|-...}
  // A user-defined optimizer's update (custom_optimizer.h): the registered rule
  // CustomUpdateAttrs::rule over every parameter, in place, as SgdUpdate's slots with the rule's
  // state lists.
  CustomUpdate,         // in {hyper, sched, P..., G..., S...}  out {P..., S...}
  // A user-defined loss (custom_loss.h): the registered kernel CustomLossAttrs::id writes the
  // loss and d loss / d pred; valid rows as the built-in losses.
  CustomLoss,           // in {pred, target, valid|-}  out {loss[1], dpred}
};
// How many kinds there are; each has its row in the op table (src/ir/op_table.h).
constexpr int kNumOpKinds = static_cast<int>(OpKind::CustomLoss) + 1;
const char* op_kind_name(OpKind k);

struct DenseAttrs {
  Activation act = Activation::None;
  int64_t bias_rows = 0;  // add the bias to the first bias_rows rows only (0: all): a jet's value rows
};

// The components of a jet (see src/backend/jet_math.h): value, d first derivatives, and the
// second derivatives d^2/dx_i dx_j for the listed pairs. A pair may instead be a Laplacian
// (trace[p] != 0): the sum of d^2/dx_i^2 over the inputs i in the bit mask trace[p], one
// component where the separate second derivatives would take one each (a PDE that reads only
// u_xx + u_yy needs 4 components in 2D, not 5; see pinn::compile_term). A jet tensor stacks the K components
// of B points as K*B rows: rows [c*B, (c+1)*B) hold component c. It may start with `head`
// rows of plain values (JetAttrs::head): points that need no derivatives (a boundary term's)
// riding along in the same network pass, rows [0, head), then the K blocks from row head.
constexpr int kMaxJetDim = 4, kMaxJetPairs = 10;
struct JetSpec {
  int32_t d = 0;
  int32_t npairs = 0;
  int8_t pi[kMaxJetPairs] = {}, pj[kMaxJetPairs] = {};
  uint8_t trace[kMaxJetPairs] = {};  // nonzero: pair p is the Laplacian over these inputs (pi, pj unused)
  constexpr int32_t K() const { return 1 + d + npairs; }
  int32_t pair_index(int i, int j) const;       // -1 if not tracked
  int32_t trace_index(uint32_t mask) const;     // -1 if not tracked
};
struct JetAttrs {
  JetSpec jet;
  Activation act = Activation::None;  // JetActivation
  int64_t head = 0;                   // value-only rows before the jet's K blocks (see JetSpec)
};
// Convolution and pooling geometry per spatial dimension (h, w).
struct ConvAttrs {
  int32_t pad_h = 0, pad_w = 0;
  int32_t stride_h = 1, stride_w = 1;
  int32_t dil_h = 1, dil_w = 1;
  Activation act = Activation::None;  // Conv2d: none or relu
};
struct PoolAttrs {
  int32_t window_h = 2, window_w = 2;
  int32_t stride_h = 2, stride_w = 2;
  int32_t pad_h = 0, pad_w = 0;  // at most half the window, so every window holds a real element
};
// Output size of a convolution or pooling window along one dimension (<= 0: the window does not
// fit): (in + 2 pad - dilation (window - 1) - 1) / stride + 1.
int64_t conv_output_size(int64_t in, int64_t window, int64_t pad, int64_t stride, int64_t dilation = 1);
struct NormAttrs {
  double eps = 1e-5;
};
struct AttentionAttrs {
  int32_t heads = 1;
  bool causal = false;
  double scale = 0;  // 0: 1 / sqrt(head dimension)
};
// The elementwise losses of a PointwiseLoss op (backend/loss_math.h has their formulas).
enum class PointwiseForm : uint8_t { L1, Huber, BceWithLogits };
const char* pointwise_form_name(PointwiseForm f);  // "l1", "huber", "bce_with_logits"
struct LossAttrs {
  Reduction reduction = Reduction::Mean;
  // Softmax cross-entropy over sequences (logits [B, S, C], labels [B, S]): a label < 0 marks a
  // position without a target (no loss, no gradient, not counted by the mean).
  bool ignore_negative = false;
  // PointwiseLoss: which loss, and Huber's delta.
  PointwiseForm form = PointwiseForm::L1;
  double delta = 1.0;
  // Softmax cross-entropy, as torch's cross_entropy(weight=, label_smoothing=): the target is
  // (1 - eps) one-hot + eps / C uniform, each class's term weighted by class_weights[c] (empty:
  // all 1); a weighted mean divides by the summed weights of the labelled targets. eps = 0 with
  // no weights is the plain kernel.
  double label_smoothing = 0.0;
  std::vector<float> class_weights = {};  // [C] or empty
};
enum class ScheduleKind : uint8_t { Constant, Step, Cosine };
// What a step whose loss or gradient norm is NaN or inf does (train.on_nan): stop the run at the
// next check (the default), skip its update (sched[kSkip] = 1: parameters and optimizer state
// keep their values), or continue as if nothing happened. All three record it in the watch.
enum class NanPolicy : uint8_t { Stop, Skip, Continue };
const char* nan_policy_name(NanPolicy p);  // "stop" | "skip" | "continue"
NanPolicy parse_nan_policy(const std::string& name);  // an Error naming the three otherwise
struct ScheduleAttrs {
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup_steps = 0;  // cosine: linear ramp from 0 over the first warmup_steps
  int64_t total_steps = 0;   // cosine: steps until min_lr (stays there after)
  double min_lr_ratio = 0;   // cosine: final lr = base * min_lr_ratio
  int64_t step_size = 1;     // step: lr *= gamma every step_size steps
  double gamma = 0.1;
  double beta1 = 0, beta2 = 0;  // Adam bias corrections 1 - beta^t (0 for SGD)
  NanPolicy on_nan = NanPolicy::Stop;
};
struct GatherAttrs {
  uint64_t seed = 0;
  bool shuffle = true;
  bool partial_last = false;  // the tail is a padded batch instead of being dropped
  // Data parallel (dist::shard_of): the batch is slice `shard` of a global batch of shards * B
  // rows drawn by the same rule, rows [shard * B, (shard + 1) * B). 0 of 1: the whole batch.
  int32_t shard = 0, shards = 1;
};
// Where each expression variable comes from, per point.
struct ExprVar {
  enum class Kind : uint8_t { Coordinate, Jet, Constant };
  Kind kind = Kind::Constant;
  int32_t index = 0;      // coordinate index, or jet component
  int32_t output = 0;     // Jet: output column
  double value = 0.0;     // Constant
};
struct ExprLossAttrs {
  std::shared_ptr<const pinn::Expression> expr;
  std::vector<ExprVar> vars;  // one per expression variable, in the expression's order
  int32_t K = 1;              // jet components per point in U
  int64_t row0 = 0;           // U's first row of this term's points (a pass shared by several terms)
  double weight = 1.0;
  std::string label;          // for reports: "residual", "boundary x=0", ...
};
struct ObservedAttrs {
  std::shared_ptr<const std::vector<float>> table;  // N rows of d coordinates and k values
};
struct SampleAttrs {
  uint64_t seed = 0;
  int64_t every = 0;
  double lo[kMaxJetDim] = {}, hi[kMaxJetDim] = {};
  int32_t face_dim = -1;  // -1: interior; -2: on every face of the box; else this coordinate
                          // is fixed at face_value
  double face_value = 0.0;
};
struct SgdAttrs {
  int64_t num_params = 0;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};
struct CustomLossAttrs {
  int32_t id = -1;  // the registry entry (src/ops/custom_loss_ops.h)
};
struct CustomUpdateAttrs {
  int32_t rule = -1;              // the registry entry (src/optim/update_rules.h)
  int64_t num_params = 0;
  std::vector<double> constants;  // UpdateArgs::constants
};
struct AdamAttrs {
  int64_t num_params = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupled_weight_decay = false;  // AdamW
};
// Tensor ops (see OpKind). An axis counts from 0 (the batch), or from the end when negative.
struct MatMulAttrs {
  bool trans_a = false, trans_b = false;  // A stored [..., K, M] / B stored [..., N, K]
};
struct TransposeAttrs {
  int32_t axis_a = -2, axis_b = -1;  // feature axes (1 .. rank-1, or negative from the end)
};
struct ClipAttrs {
  double max_norm = 1.0;
};
struct DropoutAttrs {
  double p = 0.5;    // the probability of zeroing an element, in [0, 1)
  uint64_t key = 0;  // the mask's stream: the trainer's seed mixed with the layer's name
};
struct CustomAttrs {
  int32_t id = -1;         // the registry entry (src/ops/custom_ops.h)
  bool backward = false;
  int32_t inputs = 0, outputs = 0;  // the forward op's counts
};
struct BatchNormAttrs {
  double eps = 1e-5;
  double momentum = 0.1;  // the running statistics' update weight, in (0, 1]
};
struct ScaleShiftAttrs {
  double a = 1.0, b = 0.0;  // Y = a X + b
};
struct ActivationAttrs {
  Activation act = Activation::None;
  double negative_slope = 0.01;  // leaky_relu: y = z for z > 0, negative_slope z otherwise (>= 0)
  double alpha = 1.0;            // elu: y = z for z > 0, alpha (e^z - 1) otherwise (>= 0)
};
struct ConcatAttrs {
  int32_t axis = -1;
};
struct SplitAttrs {
  int32_t axis = -1;
  std::vector<int64_t> sizes;  // each output's size along the axis; they add up to the input's
};
struct SliceAttrs {
  int32_t axis = -1;
  int64_t begin = 0, end = 0;  // 0 <= begin < end <= the size along the axis
};
struct ReduceAttrs {
  int32_t axis = -1;
  bool keepdims = false;  // Y keeps the axis as size 1
};
using OpAttrs = std::variant<std::monostate, DenseAttrs, LossAttrs, ScheduleAttrs, SgdAttrs, AdamAttrs,
                             GatherAttrs, JetAttrs, ExprLossAttrs, SampleAttrs, ObservedAttrs, ConvAttrs, PoolAttrs,
                             NormAttrs, AttentionAttrs, ScaleShiftAttrs, ActivationAttrs, ConcatAttrs, SplitAttrs,
                             SliceAttrs, ReduceAttrs, DropoutAttrs, ClipAttrs, MatMulAttrs, TransposeAttrs,
                             BatchNormAttrs, CustomAttrs, CustomUpdateAttrs, CustomLossAttrs>;
// Rows of batch `step` for a device-resident data set (the GatherBatch rule, host side).
int64_t gather_batches_per_epoch(int64_t n, int64_t batch, bool partial_last);

// Indices into StepScalar tensors (the layout kernels read).
namespace hyper {
constexpr int kBaseLr = 0, kWeightDecay = 1, kSize = 2;
}
namespace sched {
// kSkip: 1 when this step's update is skipped (NanPolicy::Skip and a non-finite loss or norm).
constexpr int kLr = 0, kBias1 = 1, kBias2 = 2, kStep = 3, kSkip = 4, kSize = 5;
}

struct Op {
  OpKind kind;
  std::string name;                // e.g. "0.dense", "backward 0.dense"
  std::vector<TensorId> in, out;   // kNone for absent optional slots
  std::vector<uint8_t> accumulate;  // per output: 1 = add into it (gradient accumulation)
  OpAttrs attrs;

  template <class T>
  const T& attr() const { return std::get<T>(attrs); }
};

// A step program: tensors and ops in execution order (a topological order).
class Program {
 public:
  TensorId add_tensor(TensorInfo t);
  // Finds a tensor by name; kNone if absent.
  TensorId find(const std::string& name) const;
  const TensorInfo& tensor(TensorId id) const;
  TensorInfo& tensor(TensorId id);  // for flags such as live_out; a tensor's name never changes
  size_t num_tensors() const { return tensors_.size(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  void add_op(Op op);  // checks ids, shapes of known kinds, and that inputs are defined
  const std::vector<Op>& ops() const { return ops_; }

  // The op that writes `t` first (kNone-like -1 for inputs/persistent tensors never written).
  int producer(TensorId t) const;

 private:
  void check_op(const Op& op) const;
  std::vector<TensorInfo> tensors_;
  std::vector<Op> ops_;
  // Kept as ops and tensors are added, so building a program is linear in its size.
  std::unordered_map<std::string, TensorId> by_name_;
  std::vector<int> producer_;  // per tensor: the first op that writes it, or -1
};

// How many leading ops compute the same outputs every step: fixed collocation points
// (SamplePoints with every = 0) and the pure ops over them and constants (a seed jet, a frozen
// Fourier projection and its features). Backends may run these ops once, before the first step,
// and leave them out of the step; the memory plan keeps their outputs whole (never reused), so
// the values survive from step to step. Constants written later (a checkpoint load) call for
// Executable::recompute_invariants. 0 for programs that start with a batch or a trained weight.
size_t invariant_prefix(const Program& p);

// A readable listing: one line per op with its tensors' names and shapes.
std::string print_program(const Program& p);

}  // namespace sg
