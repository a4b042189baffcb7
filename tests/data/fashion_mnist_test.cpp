// Fashion-MNIST from Debian's dataset-fashion-mnist package, against numbers produced by
// fashion_mnist_reference.py (an independent gzip + numpy reader), and through the loader.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "data_test_util.h"

namespace tandem::data {
namespace {

const TensorDataset& train_set() {
  static const TensorDataset ds = fashion_mnist();
  return ds;
}

TEST(FashionMnist, MatchesTheReferenceReader) {
  const TensorDataset& train = train_set();
  ASSERT_EQ(train.size(), 60000);
  EXPECT_EQ(train.data().shape(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.num_classes(), 10);
  const auto labels = train.targets().to_vector<std::int64_t>();
  EXPECT_EQ(std::vector<std::int64_t>(labels.begin(), labels.begin() + 10),
            (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  std::vector<int> counts(10, 0);
  for (auto l : labels) ++counts[static_cast<std::size_t>(l)];
  EXPECT_EQ(counts, std::vector<int>(10, 6000));
  const auto* px = train.data().data<std::uint8_t>();
  auto image_sum = [&](std::int64_t i) {
    return std::accumulate(px + i * 784, px + (i + 1) * 784, std::int64_t{0});
  };
  EXPECT_EQ(image_sum(0), 76247);
  EXPECT_EQ(image_sum(59999), 16684);
  EXPECT_EQ(std::accumulate(px, px + std::ptrdiff_t{60000} * 784, std::int64_t{0}), 3431114169);
  EXPECT_EQ(std::vector<int>(px + std::ptrdiff_t{14} * 28, px + std::ptrdiff_t{15} * 28),
            (std::vector<int>{0,   0,   1,   4,   6,   7,   2,   0,   0,   0,   0,   0,   237, 226,
                              217, 223, 222, 219, 222, 221, 216, 223, 229, 215, 218, 255, 77,  0}));
  const TensorDataset test = fashion_mnist("", Split::Test);
  ASSERT_EQ(test.size(), 10000);
  const auto test_labels = test.targets().to_vector<std::int64_t>();
  EXPECT_EQ(std::vector<std::int64_t>(test_labels.begin(), test_labels.begin() + 10),
            (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  const auto* tp = test.data().data<std::uint8_t>();
  EXPECT_EQ(std::accumulate(tp, tp + 784, std::int64_t{0}), 33456);
}

TEST(FashionMnist, PublishedStatisticsAndNormalizedEpoch) {
  // Reference: mean 0.2860405969887955, std 0.35302424451492237 over all training pixels / 255.
  EXPECT_NEAR(kFashionMnistMean, 0.2860406, 1e-4);
  EXPECT_NEAR(kFashionMnistStd, 0.3530242, 1e-4);
  DataLoader loader(
      train_set(), {.batch_size = 64,
                    .shuffle = true,
                    .num_workers = 2,
                    .transforms = {ToFloat(), Normalize({kFashionMnistMean}, {kFashionMnistStd})}});
  double sum = 0, sum_sq = 0;
  std::int64_t n = 0, batches = 0;
  for (auto& [data, target] : loader) {
    ++batches;
    const float* p = data.data<float>();
    for (std::int64_t i = 0; i < data.numel(); ++i) {
      sum += p[i];
      sum_sq += static_cast<double>(p[i]) * p[i];
    }
    n += data.numel();
  }
  EXPECT_EQ(batches, 938);  // ceil(60000 / 64)
  EXPECT_EQ(n, 60000 * 784);
  const double mean = sum / static_cast<double>(n);
  const double std = std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
  // (0.2860406 - 0.2860) / 0.3530 and 0.3530242 / 0.3530.
  EXPECT_NEAR(mean, 0.000115, 2e-5);
  EXPECT_NEAR(std, 1.0000686, 2e-5);
}

TEST(FashionMnist, SpecNamesTheDebianFiles) {
  auto ds = parse_data_spec("fashion-mnist", Split::Test);
  EXPECT_EQ(ds->size(), 10000);
  auto same = parse_data_spec(std::string("fashion-mnist:") + kFashionMnistDir, Split::Test);
  EXPECT_EQ(same->get(3).target.item(), ds->get(3).target.item());
  EXPECT_EQ(default_transforms("fashion-mnist").size(), 2u);
}

}  // namespace
}  // namespace tandem::data
