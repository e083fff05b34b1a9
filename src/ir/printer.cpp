#include <sstream>

#include "stepgraph/ir.h"

namespace sg {

namespace {

// "u, u_0, u_1, u_00+u_11": a jet's components in row-block order, inputs by index.
std::string jet_components(const JetSpec& js) {
  std::string s = "u";
  for (int i = 0; i < js.d; ++i) s += cat(", u_", i);
  for (int p = 0; p < js.npairs; ++p) {
    if (js.trace[p] == 0) {
      s += cat(", u_", int{js.pi[p]}, int{js.pj[p]});
      continue;
    }
    std::string sum;
    for (int i = 0; i < js.d; ++i)
      if ((js.trace[p] >> i) & 1) sum += cat(sum.empty() ? "" : "+", "u_", i, i);
    s += ", " + sum;
  }
  return s;
}

}  // namespace

std::string print_program(const Program& p) {
  auto list = [&](const std::vector<TensorId>& ids, const std::vector<uint8_t>* acc) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == kNone) continue;
      const TensorInfo& t = p.tensor(ids[i]);
      if (!s.empty()) s += ", ";
      s += (acc && (*acc)[i] ? "+=" : "") + t.name + shape_str(t.shape);
    }
    return s;
  };
  std::ostringstream os;
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const Op& op = p.ops()[i];
    os << "  " << i << "  " << op_kind_name(op.kind);
    if (op.kind == OpKind::Dense || op.kind == OpKind::DenseBackward)
      os << "(" << activation_name(op.attr<DenseAttrs>().act) << ")";
    if (op.kind == OpKind::Conv2d || op.kind == OpKind::Conv2dBackward) {
      const ConvAttrs& a = op.attr<ConvAttrs>();
      os << "(" << activation_name(a.act) << ", stride " << a.stride_h << "x" << a.stride_w << ", pad " << a.pad_h
         << "x" << a.pad_w << ", dilation " << a.dil_h << "x" << a.dil_w << ")";
    }
    if (op.kind == OpKind::MaxPool2d || op.kind == OpKind::MaxPool2dBackward) {
      const PoolAttrs& a = op.attr<PoolAttrs>();
      os << "(window " << a.window_h << "x" << a.window_w << ", stride " << a.stride_h << "x" << a.stride_w
         << ", pad " << a.pad_h << "x" << a.pad_w << ")";
    }
    if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionBackward) {
      const AttentionAttrs& a = op.attr<AttentionAttrs>();
      os << "(" << a.heads << (a.heads == 1 ? " head" : " heads") << (a.causal ? ", causal" : "") << ")";
    }
    // A network pass shared by several terms: the value-only rows first, each loss on its rows.
    const bool jet = op.kind == OpKind::JetInput || op.kind == OpKind::JetActivation ||
                     op.kind == OpKind::JetActivationBackward || op.kind == OpKind::FourierFeatures ||
                     op.kind == OpKind::FourierFeaturesBackward;
    if (op.kind == OpKind::JetInput) os << "(" << jet_components(op.attr<JetAttrs>().jet) << ")";
    if (jet && op.attr<JetAttrs>().head > 0) os << "(" << op.attr<JetAttrs>().head << " value-only rows first)";
    if (op.kind == OpKind::ExpressionLoss && op.attr<ExprLossAttrs>().row0 > 0)
      os << "(from row " << op.attr<ExprLossAttrs>().row0 << ")";
    if (op.kind == OpKind::SoftmaxCrossEntropy || op.kind == OpKind::MeanSquaredError)
      os << "(" << reduction_name(op.attr<LossAttrs>().reduction) << ")";
    if (op.kind == OpKind::SgdUpdate || op.kind == OpKind::AdamUpdate) {
      int64_t n = op.kind == OpKind::SgdUpdate ? op.attr<SgdAttrs>().num_params
                                               : op.attr<AdamAttrs>().num_params;
      os << "  '" << op.name << "': " << n << " parameters in one launch\n";
      continue;
    }
    os << "  '" << op.name << "': " << list(op.in, nullptr) << " -> " << list(op.out, &op.accumulate)
       << "\n";
  }
  return os.str();
}

}  // namespace sg
