// Tests of the Dataset interface, collation, TensorDataset, SyntheticDataset and parse_data_spec.
#include <gtest/gtest.h>

#include <set>

#include "data_test_util.h"

namespace tandem::data {
namespace {

using testing::error_of;

// The seeds' MyDataset: sample i is a (2) float vector {i, -i} with label i % 3.
struct MyDataset : Dataset {
  std::int64_t n = 10;
  std::int64_t fail_at = -1;
  std::int64_t size() const override { return n; }
  Example get(std::int64_t i) const override {
    TANDEM_CHECK(i != fail_at, "MyDataset: cannot read record ", i);
    return {from_vector(std::vector<float>{static_cast<float>(i), static_cast<float>(-i)}, {2}),
            scalar_tensor(static_cast<double>(i % 3), {.dtype = DType::Int64})};
  }
};

TEST(Dataset, DefaultGetBatchCollatesGetInOrder) {
  MyDataset ds;
  const std::vector<std::int64_t> idx{4, 0, 9};
  Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.data.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{4, -4, 0, 0, 9, -9}));
  EXPECT_EQ(b.target.dtype(), DType::Int64);
  EXPECT_EQ(b.target.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 0}));
}

TEST(Dataset, ErrorInOneSampleNamesItsIndex) {
  MyDataset ds;
  ds.fail_at = 7;
  const std::vector<std::int64_t> idx{1, 7, 2};
  try {
    ds.get_batch(idx);
    FAIL() << "no error";
  } catch (const SampleError& e) {
    EXPECT_EQ(e.index(), 7);
    TANDEM_EXPECT_ERROR_HAS(e.what(), "sample 7: MyDataset: cannot read record 7");
  }
  const std::vector<std::int64_t> out_of_range{3, 10};
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { ds.get_batch(out_of_range); }), "sample 10",
                          "out of range [0, 10)");
}

TEST(Dataset, CollateRejectsMismatchedSamples) {
  std::vector<Example> ex{{zeros({2, 2}), scalar_tensor(1, {.dtype = DType::Int64})},
                          {zeros({2, 3}), scalar_tensor(1, {.dtype = DType::Int64})}};
  try {
    collate(ex);
    FAIL() << "no error";
  } catch (const SampleError& e) {
    EXPECT_EQ(e.index(), 1);
    TANDEM_EXPECT_ERROR_HAS(e.what(), "(2, 3)", "(2, 2)");
  }
  ex[1] = {zeros({2, 2}), zeros({2}, {.dtype = DType::Int64})};
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { collate(ex); }), "sample 1", "one class index");
  ex[1] = {zeros({2, 2}), scalar_tensor(2.0)};
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { collate(ex); }), "sample 1", "must be int64");
}

TEST(Dataset, CollateCopiesStridedSamples) {
  Tensor base = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor column = make_view(base, {2}, {3}, 1);  // {2, 5}
  std::vector<Example> ex{{column, scalar_tensor(0, {.dtype = DType::Int64})}};
  EXPECT_EQ(collate(ex).data.to_vector<float>(), (std::vector<float>{2, 5}));
}

TEST(TensorDataset, GetIsAViewAndGetBatchGathersRows) {
  Tensor data = arange(0, 24, 1, {.dtype = DType::Float32});
  TensorDataset ds(make_view(data, {4, 2, 3}, {6, 3, 1}, 0),
                   from_vector(std::vector<std::int64_t>{3, 1, 4, 1}, {4}), 5);
  EXPECT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.num_classes(), 5);
  Example e = ds.get(2);
  EXPECT_EQ(e.data.shape(), (Shape{2, 3}));
  EXPECT_EQ(e.data.to_vector<float>(), (std::vector<float>{12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(e.target.item(), 4.0);
  const std::vector<std::int64_t> idx{3, 0};
  Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.data.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(b.data.to_vector<float>(),
            (std::vector<float>{18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(b.target.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_NE(b.data.storage(), ds.data().storage());  // a copy: transforms may change it
  const std::vector<std::int64_t> bad{1, -1};
  try {
    ds.get_batch(bad);
    FAIL() << "no error";
  } catch (const SampleError& err) {
    EXPECT_EQ(err.index(), -1);
  }
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { ds.get(4); }), "index 4 out of range [0, 4)");
}

TEST(TensorDataset, ValidatesTargets) {
  TANDEM_EXPECT_ERROR_HAS(
      error_of([] {
        TensorDataset(zeros({3, 2}), from_vector(std::vector<std::int64_t>{0, 5, 1}, {3}), 5);
      }),
      "target 5 of sample 1 is outside [0, 5)");
  TANDEM_EXPECT_ERROR_HAS(error_of([] {
                            TensorDataset(zeros({3, 2}), zeros({2}, {.dtype = DType::Int64}));
                          }),
                          "must be (N) with N = 3");
  TANDEM_EXPECT_ERROR_HAS(error_of([] {
                            TensorDataset(zeros({3, 2}), zeros({3}));
                          }),
                          "targets must be integers");
  // uint8 targets become int64.
  TensorDataset ds(zeros({2, 1}),
                   from_host(std::vector<std::uint8_t>{2, 0}.data(), DType::UInt8, {2}));
  EXPECT_EQ(ds.targets().dtype(), DType::Int64);
  EXPECT_EQ(ds.targets().to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0}));
}

TEST(Synthetic, DeterministicPerIndexAndSameThroughBothPaths) {
  SyntheticDataset a({.shape = {1, 6, 5}, .classes = 4, .count = 50, .seed = 3});
  SyntheticDataset b({.shape = {1, 6, 5}, .classes = 4, .count = 50, .seed = 3});
  const std::vector<std::int64_t> idx{17, 2, 49};
  Batch batch = a.get_batch(idx);
  EXPECT_EQ(batch.data.shape(), (Shape{3, 1, 6, 5}));
  EXPECT_EQ(batch.data.dtype(), DType::UInt8);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    Example e = b.get(idx[k]);
    const auto row = e.data.to_vector<std::int64_t>();
    const auto all = batch.data.to_vector<std::int64_t>();
    EXPECT_EQ(std::vector<std::int64_t>(all.begin() + static_cast<std::ptrdiff_t>(k * 30),
                                        all.begin() + static_cast<std::ptrdiff_t>(k * 30 + 30)),
              row);
    EXPECT_EQ(e.target.item(), batch.target.to_vector<std::int64_t>()[k]);
  }
  SyntheticDataset other({.shape = {1, 6, 5}, .classes = 4, .count = 50, .seed = 4});
  SyntheticDataset test(
      {.shape = {1, 6, 5}, .classes = 4, .count = 50, .seed = 3, .split = Split::Test});
  EXPECT_NE(other.get(17).data.to_vector<std::int64_t>(), a.get(17).data.to_vector<std::int64_t>());
  EXPECT_NE(test.get(17).data.to_vector<std::int64_t>(), a.get(17).data.to_vector<std::int64_t>());
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { a.get(50); }), "index 50 out of range [0, 50)");
}

TEST(Synthetic, ClassesAreBalancedAndLearnable) {
  // Each class has a fixed +-48 pattern under +-80 noise: the mean over a class's samples
  // recovers the pattern's sign at (almost) every pixel, and the pattern differs between classes.
  SyntheticDataset ds({.shape = {1, 8, 8}, .classes = 3, .count = 3000, .seed = 11});
  std::vector<std::int64_t> idx(3000);
  for (std::int64_t i = 0; i < 3000; ++i) idx[static_cast<std::size_t>(i)] = i;
  Batch b = ds.get_batch(idx);
  const auto px = b.data.to_vector<double>();
  const auto labels = b.target.to_vector<std::int64_t>();
  std::vector<double> sum(std::size_t{3} * 64, 0.0);
  std::vector<int> count(3, 0);
  for (std::size_t i = 0; i < 3000; ++i) {
    ASSERT_GE(labels[i], 0);
    ASSERT_LT(labels[i], 3);
    ++count[static_cast<std::size_t>(labels[i])];
    for (std::size_t e = 0; e < 64; ++e)
      sum[static_cast<std::size_t>(labels[i]) * 64 + e] += px[i * 64 + e];
  }
  for (int c = 0; c < 3; ++c) {
    EXPECT_GT(count[static_cast<std::size_t>(c)], 850);  // 1000 expected; 850 is > 5 sigma away
    int near_pattern = 0;
    for (std::size_t e = 0; e < 64; ++e) {
      const double mean =
          sum[static_cast<std::size_t>(c) * 64 + e] / count[static_cast<std::size_t>(c)];
      near_pattern += std::abs(std::abs(mean - 127.5) - 48.0) < 8.0;
    }
    EXPECT_EQ(near_pattern, 64);
  }
  int same = 0;
  for (std::size_t e = 0; e < 64; ++e)
    same += (sum[e] / count[0] > 127.5) == (sum[64 + e] / count[1] > 127.5);
  EXPECT_LT(same, 56);
  EXPECT_GT(same, 8);
}

TEST(Synthetic, FloatFeatures) {
  SyntheticDataset ds({.shape = {100}, .classes = 2, .count = 10, .dtype = DType::Float32});
  Example e = ds.get(3);
  EXPECT_EQ(e.data.shape(), (Shape{100}));
  for (float v : e.data.to_vector<float>()) {
    EXPECT_GE(v, -1.5f);
    EXPECT_LE(v, 1.5f);
  }
}

TEST(DataSpec, Synthetic) {
  auto ds = parse_data_spec("synthetic:1x28x28:10:600");
  EXPECT_EQ(ds->size(), 600);
  EXPECT_EQ(ds->num_classes(), 10);
  EXPECT_EQ(ds->get(5).data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(ds->get(5).data.dtype(), DType::UInt8);
  auto features = parse_data_spec("synthetic:100:2:50:7", Split::Test);
  EXPECT_EQ(features->get(0).data.shape(), (Shape{100}));
  EXPECT_EQ(features->get(0).data.dtype(), DType::Float32);
  const auto* s = dynamic_cast<const SyntheticDataset*>(features.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->options().seed, 7u);
  EXPECT_EQ(s->options().split, Split::Test);
  EXPECT_EQ(default_transforms("synthetic:1x28x28:10:600").size(), 1u);
  EXPECT_EQ(default_transforms("synthetic:100:2:50").size(), 0u);
}

TEST(DataSpec, Errors) {
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("synthetic:1x0x28:10:5"); }),
                          "data spec 'synthetic:1x0x28:10:5'", "size '0'");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("synthetic:1x28x28:ten:5"); }),
                          "class count 'ten'");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("synthetic:1x28"); }),
                          "synthetic:SHAPE:CLASSES:COUNT[:SEED]");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("imagenet:/x"); }),
                          "unknown kind 'imagenet'", "fashion-mnist[:DIR]");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("mnist"); }), "mnist needs a directory");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("cifar10:"); }),
                          "cifar10 needs a directory");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_data_spec("mnist:/nonexistent/dir"); }),
                          "/nonexistent/dir", "train-images-idx3-ubyte.gz");
}

TEST(DataSpec, FilesOfEachKind) {
  testing::TempDir dir;
  testing::write_text(dir / "d.csv", "a,b,label\n1,2,1\n3,4,0\n");
  auto csv = parse_data_spec("csv:" + (dir / "d.csv").string());
  EXPECT_EQ(csv->size(), 2);
  EXPECT_EQ(csv->get(0).data.to_vector<float>(), (std::vector<float>{1, 2}));
  testing::write_file(dir / "t10k-images-idx3-ubyte", testing::idx_bytes({1, 2, 2}, {1, 2, 3, 4}));
  testing::write_file(dir / "t10k-labels-idx1-ubyte.gz",
                      testing::gzip(testing::idx_bytes({1}, {6})));
  auto mn = parse_data_spec("mnist:" + dir.path().string(), Split::Test);
  EXPECT_EQ(mn->size(), 1);
  EXPECT_EQ(mn->get(0).target.item(), 6.0);
  EXPECT_EQ(default_transforms("mnist:x").size(), 2u);
  EXPECT_EQ(default_transforms("cifar10:x").size(), 2u);
  EXPECT_EQ(default_transforms("cifar10:x", /*normalize=*/false).size(), 1u);  // ToFloat alone
  EXPECT_EQ(default_transforms("mnist:x", false).size(), 1u);
  EXPECT_EQ(default_transforms("synthetic:100:2:50", false).size(), 0u);
  EXPECT_EQ(default_transforms("csv:x").size(), 0u);
}

}  // namespace
}  // namespace tandem::data
