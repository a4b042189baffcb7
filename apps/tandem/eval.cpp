// `tandem eval`: a model's loss, accuracy, per-class accuracy and confusion matrix on a dataset's
// test split, from a model.safetensors (or a checkpoint directory). --json prints one object.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "tandem/data/data_loader.h"
#include "tandem/data/data_spec.h"
#include "tandem/io/checkpoint.h"
#include "tandem/io/safetensors.h"
#include "tandem/train/config.h"
#include "tandem/train/devices.h"
#include "tandem/train/evaluate.h"
#include "tandem/train/models.h"

namespace tandem::app {
namespace {

struct EvalFlags {
  std::string model;
  std::string weights;
  std::string data = "fashion-mnist";
  bool normalize = true;
  std::string devices = "auto";
  std::int64_t batch_size = 500;
  int workers = 2;
  std::string precision = "fp32";
  bool json = false;
};

}  // namespace

Command add_eval_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate trained weights on a dataset's test split");
  auto f = std::make_shared<EvalFlags>();
  cmd->add_option("--model", f->model, "seed-cnn, mlp, cnn or resnet8")->required();
  cmd->add_option("--weights", f->weights,
                  "model.safetensors (PyTorch names), or a checkpoint directory")
      ->required();
  cmd->add_option("--data", f->data, "The dataset, as tandem train's --data (default fashion-mnist)");
  cmd->add_option("--normalize", f->normalize,
                  "As tandem train's --normalize: true (default) or false, as the run trained");
  cmd->add_option("--devices", f->devices, "auto (default), cpu or cuda:I");
  cmd->add_option("--batch-size", f->batch_size, "Evaluation batch size (default 500)");
  cmd->add_option("--workers", f->workers, "Data loader worker threads (default 2)");
  cmd->add_option("--precision", f->precision,
                  "fp32 (default) or bf16: as tandem train's --precision (autocast)");
  cmd->add_flag("--json", f->json,
                "Print one JSON object: loss, accuracy, per_class_accuracy, confusion_matrix");
  return [f]() {
    TANDEM_CHECK(f->batch_size >= 1, "--batch-size: ", f->batch_size, " is not a positive batch size");
    TANDEM_CHECK(f->workers >= 0, "--workers: ", f->workers, " is negative");
    const Precision precision = train::parse_precision(f->precision);
    const train::ModelKind kind = train::parse_model_kind(f->model);
    const train::DeviceLayout layout = train::parse_devices(f->devices);
    const Device device = layout.devices.front();
    const auto test_set = data::parse_data_spec(f->data, data::Split::Test);
    TANDEM_CHECK(test_set->size() > 0, "--data ", f->data, ": the test set is empty");
    const train::InputSpec input{test_set->get(0).data.shape(), test_set->num_classes()};
    const auto model = train::make_model(kind, input);

    nn::StateDict weights;
    if (std::filesystem::is_directory(f->weights)) {
      weights = io::read_checkpoint(f->weights).model;
    } else {
      TANDEM_CHECK(std::filesystem::exists(f->weights), "--weights ", f->weights, ": no such file");
      weights = io::load_safetensors(f->weights).tensors;
    }
    try {
      model->load_state_dict(weights);
    } catch (const Error& e) {
      throw Error("--weights " + f->weights + " does not fit model " + f->model + " on " + f->data +
                  ": " + e.what());
    }
    model->to(device);
    data::DataLoader loader(test_set, {.batch_size = f->batch_size,
                                       .num_workers = f->workers,
                                       .transforms = data::default_transforms(f->data, f->normalize)});
    const AutocastGuard autocast(precision);
    const train::EvalResult result = train::evaluate(*model, loader, input.classes, device);
    if (f->json) {
      std::printf("%s\n", train::eval_to_json(result).c_str());
    } else {
      std::printf("%s on %s (%s)\n%s", f->model.c_str(), f->data.c_str(), f->weights.c_str(),
                  train::eval_to_text(result).c_str());
    }
    return 0;
  };
}

}  // namespace tandem::app
