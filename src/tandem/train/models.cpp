// The registry's four architectures, each the same nn.Module as its PyTorch definition in
// tests/apps/check_pytorch_load.py (and the anchor script), so state dicts trade both ways.
#include "tandem/train/models.h"

#include "tandem/autograd/functions.h"

namespace tandem::train {
namespace {

constexpr const char* kNames[] = {"seed-cnn", "mlp", "cnn", "resnet8"};

nn::Conv2d conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions{.in_channels = in, .out_channels = out, .kernel_size = 3,
                                      .stride = stride, .padding = 1, .bias = false});
}

std::string joined_names() {
  std::string out;
  for (const char* name : kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// (C, H, W) of an image input; an error naming the model otherwise.
std::array<std::int64_t, 3> image_shape(const InputSpec& input, const char* model) {
  TANDEM_CHECK(input.sample_shape.size() == 3, "model ", model,
               " needs images (C, H, W), but the data's samples have shape ",
               to_string(input.sample_shape), " (use --model mlp for feature vectors)");
  return {input.sample_shape[0], input.sample_shape[1], input.sample_shape[2]};
}

}  // namespace

std::vector<std::string> model_names() { return {std::begin(kNames), std::end(kNames)}; }

ModelKind parse_model_kind(std::string_view name) {
  if (name == "seed-cnn") return ModelKind::SeedCnn;
  if (name == "mlp") return ModelKind::Mlp;
  if (name == "cnn") return ModelKind::Cnn;
  if (name == "resnet8") return ModelKind::ResNet8;
  TANDEM_FAIL("unknown model '", name, "' (expected one of ", joined_names(), ")");
}

std::string model_kind_name(ModelKind kind) { return kNames[static_cast<int>(kind)]; }

SeedCnn::SeedCnn(std::int64_t channels, std::int64_t height, std::int64_t width,
                 std::int64_t classes)
    : conv1(register_module("conv1", nn::Conv2d(channels, 16, 3, 1, 1))),
      conv2(register_module("conv2", nn::Conv2d(16, 32, 3, 1, 1))),
      fc(register_module("fc", nn::Linear(32 * height * width, classes))) {}

Tensor SeedCnn::forward(const Tensor& input) {
  Tensor x = conv2(conv1(input));
  return fc(x.view({x.size(0), -1}));
}

Mlp::Mlp(std::int64_t in_features, std::int64_t classes)
    : fc1(register_module("fc1", nn::Linear(in_features, 50))),
      fc2(register_module("fc2", nn::Linear(50, classes))) {}

Tensor Mlp::forward(const Tensor& x) { return fc2(relu(fc1(x.flatten(1)))); }

Cnn::Cnn(std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t classes)
    : conv1(register_module("conv1", nn::Conv2d(channels, 32, 3, 1, 1))),
      conv2(register_module("conv2", nn::Conv2d(32, 64, 3, 1, 1))),
      fc1(register_module("fc1", nn::Linear(64 * (height / 4) * (width / 4), 128))),
      fc2(register_module("fc2", nn::Linear(128, classes))) {}

Tensor Cnn::forward(const Tensor& input) {
  const Pool2dParams pool{};  // 2x2, stride 2
  Tensor x = max_pool2d(relu(conv1(input)), pool);
  x = max_pool2d(relu(conv2(x)), pool);
  return fc2(relu(fc1(x.flatten(1))));
}

BasicBlock::BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride)
    : conv1(register_module("conv1", conv3x3(in_channels, out_channels, stride))),
      bn1(register_module("bn1", nn::BatchNorm2d(out_channels))),
      conv2(register_module("conv2", conv3x3(out_channels, out_channels, 1))),
      bn2(register_module("bn2", nn::BatchNorm2d(out_channels))) {
  if (stride != 1 || in_channels != out_channels) {
    downsample.push_back(nn::Conv2d(nn::Conv2dOptions{.in_channels = in_channels,
                                                      .out_channels = out_channels,
                                                      .kernel_size = 1,
                                                      .stride = stride,
                                                      .bias = false}));
    downsample.push_back(nn::BatchNorm2d(out_channels));
  }
  downsample = register_module("downsample", downsample);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  return relu(out + downsample(x));
}

ResNet8::ResNet8(std::int64_t channels, std::int64_t classes)
    : conv1(register_module("conv1", conv3x3(channels, 16, 1))),
      bn1(register_module("bn1", nn::BatchNorm2d(16))),
      layer1(register_module("layer1", nn::Sequential(BasicBlock(16, 16, 1)))),
      layer2(register_module("layer2", nn::Sequential(BasicBlock(16, 32, 2)))),
      layer3(register_module("layer3", nn::Sequential(BasicBlock(32, 64, 2)))),
      fc(register_module("fc", nn::Linear(64, classes))) {}

Tensor ResNet8::forward(const Tensor& input) {
  Tensor x = relu(bn1(conv1(input)));
  x = layer3(layer2(layer1(x)));
  x = adaptive_avg_pool2d(x, {1, 1});
  return fc(x.flatten(1));
}

std::shared_ptr<nn::Module> make_model(ModelKind kind, const InputSpec& input) {
  const std::string name = model_kind_name(kind);
  TANDEM_CHECK(input.classes >= 2, "model ", name, ": the data has ", input.classes,
               " classes; a classifier needs at least 2 (is the class count known?)");
  TANDEM_CHECK(!input.sample_shape.empty(), "model ", name, ": the data's samples are scalars");
  for (std::int64_t size : input.sample_shape) {
    TANDEM_CHECK(size > 0, "model ", name, ": empty sample shape ", to_string(input.sample_shape));
  }
  switch (kind) {
    case ModelKind::SeedCnn: {
      const auto [c, h, w] = image_shape(input, "seed-cnn");
      return std::make_shared<SeedCnn>(c, h, w, input.classes);
    }
    case ModelKind::Mlp:
      return std::make_shared<Mlp>(numel(input.sample_shape), input.classes);
    case ModelKind::Cnn: {
      const auto [c, h, w] = image_shape(input, "cnn");
      TANDEM_CHECK(h >= 4 && w >= 4, "model cnn pools twice by 2 and needs images of at least 4x4, "
                   "but the data's are ", h, "x", w);
      return std::make_shared<Cnn>(c, h, w, input.classes);
    }
    case ModelKind::ResNet8: {
      const auto [c, h, w] = image_shape(input, "resnet8");
      TANDEM_CHECK(h >= 4 && w >= 4, "model resnet8 downsamples by 4 and needs images of at least "
                   "4x4, but the data's are ", h, "x", w);
      return std::make_shared<ResNet8>(c, input.classes);
    }
  }
  TANDEM_FAIL("make_model: unknown model kind");
}

}  // namespace tandem::train
