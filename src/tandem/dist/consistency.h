// Checks that every rank trains the same thing, before the first step: the model's parameters
// (names, shapes, dtypes, in order) and the gradient-bucket layout are compared with rank 0's,
// and a mismatch is an error on every rank naming the ranks and the parameters that differ.
#pragma once

#include <string>
#include <vector>

#include "tandem/base/dtype.h"
#include "tandem/base/shape.h"
#include "tandem/dist/process_group.h"

namespace tandem::dist {

struct ParamInfo {
  std::string name;  // "conv1.weight"
  Shape shape;
  DType dtype = DType::Float32;
};

// Rank `root`'s `text` on every rank (two broadcasts: the length, then the bytes).
std::string broadcast_string(ProcessGroup& group, const std::string& text, int root = 0);

// Throws on every rank when any rank's parameters or bucket layout differ from rank 0's.
void check_same_model(ProcessGroup& group, const std::vector<ParamInfo>& params,
                      const std::string& bucket_layout);

}  // namespace tandem::dist
