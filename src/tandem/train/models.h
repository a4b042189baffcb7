// The model registry of `tandem train` / `tandem eval`: seed-cnn, mlp, cnn and resnet8 built by
// name for a dataset's sample shape and class count, with PyTorch's parameter names. Not a
// general model zoo: each entry is one fixed architecture, the same as its PyTorch definition.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/nn/nn.h"

namespace tandem::train {

enum class ModelKind : std::uint8_t { SeedCnn, Mlp, Cnn, ResNet8 };

// What a model must fit: one sample's shape ((C, H, W) images or (D) feature vectors) and the
// number of classes.
struct InputSpec {
  Shape sample_shape;
  std::int64_t classes = 0;
};

// "seed-cnn", "mlp", "cnn", "resnet8".
std::vector<std::string> model_names();
ModelKind parse_model_kind(std::string_view name);  // an error listing the names
std::string model_kind_name(ModelKind kind);

// The seed document's Net: conv1 (C->16, 3x3, pad 1) -> conv2 (16->32) -> fc (32*H*W -> classes),
// no activations, as the seed wrote it.
struct SeedCnn : nn::Module {
  nn::Conv2d conv1;
  nn::Conv2d conv2;
  nn::Linear fc;
  SeedCnn(std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t classes);
  // x (N, C, H, W) -> (N, classes)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SeedCnn"; }
};

// The second seed document's MyModel: fc1 (D -> 50) -> ReLU -> fc2 (50 -> classes); any input
// (N, ...) is flattened to (N, D) first.
struct Mlp : nn::Module {
  nn::Linear fc1;
  nn::Linear fc2;
  Mlp(std::int64_t in_features, std::int64_t classes);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Mlp"; }
};

// conv1 (C->32) -relu-maxpool2, conv2 (32->64) -relu-maxpool2, fc1 (64*(H/4)*(W/4) -> 128) -relu-
// fc2 (128 -> classes); the anchor script's CNN.
struct Cnn : nn::Module {
  nn::Conv2d conv1;
  nn::Conv2d conv2;
  nn::Linear fc1;
  nn::Linear fc2;
  Cnn(std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t classes);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Cnn"; }
};

// torchvision's BasicBlock: conv3x3-bn-relu-conv3x3-bn plus the shortcut (a 1x1 conv + bn named
// "downsample.0" / "downsample.1" when the shape changes), then relu.
struct BasicBlock : nn::Module {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample;  // empty when the shortcut is the identity
  BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride);
  // x (N, in, H, W) -> (N, out, H/stride, W/stride)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }
};

// A small ResNet for 32x32 images: conv1 (C->16, 3x3) -bn1-relu, layer1..layer3 (one BasicBlock
// each, 16/32/64 channels, strides 1/2/2), adaptive average pool to 1x1, fc (64 -> classes).
struct ResNet8 : nn::Module {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Sequential layer1;
  nn::Sequential layer2;
  nn::Sequential layer3;
  nn::Linear fc;
  ResNet8(std::int64_t channels, std::int64_t classes);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet8"; }
};

// The model `kind` for `input`; an error naming the model and the shape when it cannot take it
// (an image model on feature vectors, images too small to pool, no class count).
std::shared_ptr<nn::Module> make_model(ModelKind kind, const InputSpec& input);

}  // namespace tandem::train
