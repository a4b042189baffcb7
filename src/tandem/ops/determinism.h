// Whether kernels must take deterministic algorithms (the same bits on every run) rather than
// faster ones that sum in a varying order (cuDNN's convolution gradients by atomic adds), as
// PyTorch's torch.use_deterministic_algorithms. Process-wide; on by default, so the library is
// reproducible unless asked otherwise; `tandem train` turns it off unless --deterministic.
#pragma once

namespace tandem::ops {

void set_deterministic_algorithms(bool on);
bool deterministic_algorithms();

// Sets the switch for a scope and puts the previous setting back.
class DeterministicAlgorithms {
 public:
  explicit DeterministicAlgorithms(bool on) : previous_(deterministic_algorithms()) {
    set_deterministic_algorithms(on);
  }
  ~DeterministicAlgorithms() { set_deterministic_algorithms(previous_); }
  DeterministicAlgorithms(const DeterministicAlgorithms&) = delete;
  DeterministicAlgorithms& operator=(const DeterministicAlgorithms&) = delete;

 private:
  bool previous_;
};

}  // namespace tandem::ops
