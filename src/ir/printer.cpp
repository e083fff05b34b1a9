#include <sstream>

#include "ir/op_table.h"
#include "stepgraph/ir.h"

namespace sg {

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
    const OpDef& def = op_def(op.kind);
    os << "  " << i << "  " << def.name;
    if (def.attrs_text) os << def.attrs_text(op);
    if (def.summary) {
      os << "  '" << op.name << "': " << def.summary(op) << "\n";
      continue;
    }
    os << "  '" << op.name << "': " << list(op.in, nullptr) << " -> " << list(op.out, &op.accumulate)
       << "\n";
  }
  return os.str();
}

}  // namespace sg
