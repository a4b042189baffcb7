// parse_data_spec: the command line's --data argument, as a dataset. The spellings:
//   fashion-mnist                         Debian's dataset-fashion-mnist (kFashionMnistDir)
//   fashion-mnist:DIR  mnist:DIR          IDX files with the canonical names in DIR
//   cifar10:DIR                           CIFAR-10 binary batches in DIR (or
//   DIR/cifar-10-batches-bin) csv:FILE                              features + label in the last
//   column, header auto-detected synthetic:SHAPE:CLASSES:COUNT[:SEED]  SHAPE is sizes joined by
//   'x': synthetic:1x28x28:10:60000
//                                         gives uint8 images; a one-size SHAPE
//                                         (synthetic:100:2:1000) gives float32 feature vectors.
//                                         SEED defaults to 0.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/transforms.h"

namespace tandem::data {

// The dataset a spec names, for `split` (csv ignores it; synthetic draws other samples for Test).
// Errors quote the spec and say which part is wrong.
std::shared_ptr<const Dataset> parse_data_spec(std::string_view spec, Split split = Split::Train);

// The usual preprocessing for a spec's data: ToFloat + Normalize with the dataset's published
// statistics for fashion-mnist, mnist and cifar10 (ToFloat alone when `normalize` is false: pixels
// in [0, 1], as torchvision's ToTensor); ToFloat for synthetic images; none otherwise.
std::vector<AnyTransform> default_transforms(std::string_view spec, bool normalize = true);

}  // namespace tandem::data
