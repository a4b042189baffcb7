// Hostile-input tests of the IDX, gzip, CIFAR-10 and CSV readers: files written here, truncated at
// every structural boundary or corrupted on purpose; each error must name the file and the
// offset (binary formats) or line and column (CSV).
#include <gtest/gtest.h>

#include "data_test_util.h"

namespace tandem::data {
namespace {

using testing::Bytes;
using testing::error_of;
using testing::gzip;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_file;
using testing::write_text;

// Two 2x3 images (header 16 bytes + 12 data bytes = 28) and their labels (8 + 2 = 10 bytes).
Bytes two_images() {
  return idx_bytes({2, 2, 3}, {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255});
}
Bytes two_labels() { return idx_bytes({2}, {7, 3}); }

// ---------------- IDX ----------------

TEST(Idx, ReadsRawAndGzipPairs) {
  TempDir dir;
  write_file(dir / "img", two_images());
  write_file(dir / "lab", two_labels());
  write_file(dir / "img.gz", gzip(two_images()));
  write_file(dir / "lab.gz", gzip(two_labels()));
  for (const auto& [img, lab] : {std::pair{"img", "lab"}, std::pair{"img.gz", "lab.gz"}}) {
    TensorDataset ds = load_idx(dir / img, dir / lab, 10);
    ASSERT_EQ(ds.size(), 2);
    EXPECT_EQ(ds.data().shape(), (Shape{2, 1, 2, 3}));
    EXPECT_EQ(ds.data().dtype(), DType::UInt8);
    EXPECT_EQ(ds.data().to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255}));
    EXPECT_EQ(ds.targets().to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 3}));
    EXPECT_EQ(ds.num_classes(), 10);
  }
}

TEST(Idx, ParsesHeaderOfAnyRank) {
  const Bytes b = idx_bytes({2, 1, 2, 2}, Bytes(8, 9));
  IdxHeader h = parse_idx(b, "x");
  EXPECT_EQ(h.dims, (Shape{2, 1, 2, 2}));
  EXPECT_EQ(h.data_offset, 20u);
}

TEST(Idx, TruncationAtEveryByteNamesFileAndOffset) {
  TempDir dir;
  write_file(dir / "lab", two_labels());
  const Bytes full = two_images();
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    const auto path = dir / ("img_cut_" + std::to_string(cut));
    write_file(path, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut)));
    const std::string msg = error_of([&] { load_idx(path, dir / "lab", 10); });
    const char* part = cut < 16 ? "truncated IDX header" : "truncated IDX data";
    TANDEM_EXPECT_ERROR_HAS(msg, path.string(), part, "at offset " + std::to_string(cut));
  }
}

TEST(Idx, TruncatedLabelFile) {
  TempDir dir;
  write_file(dir / "img", two_images());
  const Bytes full = two_labels();
  for (std::size_t cut : {0u, 3u, 4u, 7u, 8u, 9u}) {
    const auto path = dir / ("lab_cut_" + std::to_string(cut));
    write_file(path, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut)));
    TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img", path, 10); }), path.string(),
                            "at offset " + std::to_string(cut));
  }
}

TEST(Idx, WrongMagicTypeAndRank) {
  Bytes b = two_images();
  b[1] = 0x08;
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "m.idx"); }), "m.idx",
                          "bad IDX magic at offset 0", "0x08");
  b = two_images();
  b[2] = 0x0d;  // float32 elements
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "t.idx"); }), "t.idx", "0x0d at offset 2");
  b = two_images();
  b[3] = 0;
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "r.idx"); }), "r.idx", "rank 0 at offset 3");
  b = two_images();
  b[3] = 200;
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "r2.idx"); }), "r2.idx",
                          "rank 200 at offset 3");
}

TEST(Idx, HugeSizesAreRejectedWithoutAllocating) {
  Bytes b = idx_bytes({0x7fffffff, 0x7fffffff, 0x7fffffff}, {});
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "huge"); }), "huge", "multiply to more than",
                          "offset 12");
  b = idx_bytes({0x80000000u}, {});
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "big"); }), "big", "2147483648 at offset 4");
  b = idx_bytes({1000, 28, 28}, Bytes(10));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "short"); }), "short",
                          "need 784000 bytes from offset 16", "at offset 26");
}

TEST(Idx, TrailingBytes) {
  Bytes b = two_images();
  b.push_back(1);
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_idx(b, "tail"); }), "tail",
                          "1 unexpected bytes after the IDX data at offset 28");
}

TEST(Idx, ImagesAndLabelsMustAgree) {
  TempDir dir;
  write_file(dir / "img", two_images());
  write_file(dir / "lab3", idx_bytes({3}, {1, 2, 3}));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img", dir / "lab3", 10); }),
                          (dir / "img").string(), (dir / "lab3").string(), "holds 2 images",
                          "holds 3 labels", "offset 4");
  // Swapped: the image file must have rank 3 and the label file rank 1.
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "lab3", dir / "img", 10); }),
                          (dir / "lab3").string(), "rank 1 at offset 3");
  write_file(dir / "img1", idx_bytes({2, 6}, Bytes(12)));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img1", dir / "lab3", 10); }),
                          (dir / "img1").string(), "rank 2 at offset 3");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img", dir / "img", 10); }),
                          (dir / "img").string(), "rank 3 at offset 3", "labels need rank 1");
}

TEST(Idx, LabelOutOfRangeNamesOffsetAndSample) {
  TempDir dir;
  write_file(dir / "img", two_images());
  write_file(dir / "lab", idx_bytes({2}, {3, 10}));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img", dir / "lab", 10); }),
                          (dir / "lab").string(), "label 10 at offset 9 (sample 1)", "[0, 10)");
  // With more classes the same file is fine.
  EXPECT_EQ(load_idx(dir / "img", dir / "lab", 11).targets().to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{3, 10}));
}

TEST(Idx, EmptyFiles) {
  TempDir dir;
  write_file(dir / "empty", {});
  write_file(dir / "lab", two_labels());
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "empty", dir / "lab", 10); }),
                          (dir / "empty").string(), "truncated IDX header at offset 0");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "missing", dir / "lab", 10); }),
                          (dir / "missing").string(), "cannot open");
}

TEST(Idx, ErrorsInGzipFilesNameTheInflatedOffset) {
  TempDir dir;
  Bytes bad = two_images();
  bad[0] = 0x42;
  write_file(dir / "img.gz", gzip(bad));
  write_file(dir / "lab", two_labels());
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { load_idx(dir / "img.gz", dir / "lab", 10); }),
                          (dir / "img.gz").string() + " (inflated)", "bad IDX magic at offset 0");
}

// ---------------- gzip ----------------

TEST(Gzip, RoundTripsAndConcatenatedMembers) {
  Bytes data(100000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 % 251);
  EXPECT_EQ(gunzip(gzip(data), "x"), data);
  Bytes two = gzip({1, 2, 3});
  const Bytes second = gzip({4, 5});
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(gunzip(two, "cat"), (Bytes{1, 2, 3, 4, 5}));
}

TEST(Gzip, TruncatedStreamNamesOffset) {
  TempDir dir;
  const Bytes z = gzip(idx_bytes({50, 4, 4}, Bytes(800, 17)));
  for (std::size_t cut : {std::size_t{2}, std::size_t{10}, z.size() / 2, z.size() - 1}) {
    const auto path = dir / ("cut" + std::to_string(cut) + ".gz");
    write_file(path, Bytes(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(cut)));
    TANDEM_EXPECT_ERROR_HAS(error_of([&] { read_maybe_gzip(path); }), path.string(),
                            "gzip stream is truncated at offset " + std::to_string(cut));
  }
}

TEST(Gzip, CorruptStreamNamesOffset) {
  TempDir dir;
  Bytes data(4000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * i % 253);
  Bytes z = gzip(data);
  // A bad header method byte, a damaged deflate block, and a wrong CRC in the trailer.
  Bytes method = z;
  method[2] = 7;
  Bytes block = z;
  for (std::size_t i = 10; i < 30; ++i) block[i] = 0xff;
  Bytes crc = z;
  crc[z.size() - 6] ^= 0x5a;
  int k = 0;
  for (const Bytes& bad : {method, block, crc}) {
    const auto path = dir / ("bad" + std::to_string(k++) + ".gz");
    write_file(path, bad);
    TANDEM_EXPECT_ERROR_HAS(error_of([&] { read_maybe_gzip(path); }), path.string(),
                            "corrupt gzip stream near offset");
  }
}

TEST(Gzip, TrailingGarbageAndSizeLimit) {
  Bytes z = gzip({1, 2, 3});
  const std::size_t end = z.size();
  z.push_back(0);
  z.push_back(0);
  TANDEM_EXPECT_ERROR_HAS(
      error_of([&] { gunzip(z, "tail.gz"); }), "tail.gz",
      "2 unexpected bytes after the gzip stream at offset " + std::to_string(end));
  const Bytes big = gzip(Bytes(1 << 20, 0));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { gunzip(big, "bomb.gz", 4096); }), "bomb.gz",
                          "exceeds the limit of 4096 bytes");
}

// ---------------- CIFAR-10 ----------------

// `records` records; record r has label r % 10 and pixel p = (r * 31 + p) % 256.
Bytes cifar_records(std::size_t records, std::size_t first = 0) {
  Bytes out;
  for (std::size_t r = first; r < first + records; ++r) {
    out.push_back(static_cast<std::uint8_t>(r % 10));
    for (std::size_t p = 0; p < 3072; ++p)
      out.push_back(static_cast<std::uint8_t>((r * 31 + p) % 256));
  }
  return out;
}

void write_cifar_dir(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (int i = 1; i <= 5; ++i) {
    write_file(dir / ("data_batch_" + std::to_string(i) + ".bin"),
               cifar_records(2, 2 * static_cast<std::size_t>(i - 1)));
  }
  write_file(dir / "test_batch.bin", cifar_records(3, 100));
}

TEST(Cifar, ReadsBatchesInOrderWithChannelPlanes) {
  TempDir dir;
  write_cifar_dir(dir.path());
  TensorDataset train = cifar10(dir.path(), Split::Train);
  ASSERT_EQ(train.size(), 10);
  EXPECT_EQ(train.data().shape(), (Shape{10, 3, 32, 32}));
  EXPECT_EQ(train.targets().to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Record 7, green plane (c = 1), row 2, column 5: pixel 1024 + 2 * 32 + 5.
  EXPECT_EQ(train.data().at({7, 1, 2, 5}), static_cast<double>((7 * 31 + 1024 + 69) % 256));
  TensorDataset test = cifar10(dir.path(), Split::Test);
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(test.targets().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2}));
  // The archive's own folder name is found inside the given directory.
  TempDir outer;
  write_cifar_dir(outer / "cifar-10-batches-bin");
  EXPECT_EQ(Cifar10(outer.path(), Split::Test).size(), 3);
}

TEST(Cifar, SizeNotAMultipleOfTheRecord) {
  TempDir dir;
  write_cifar_dir(dir.path());
  Bytes b = cifar_records(1);
  b.resize(3073 + 100, 0);
  write_file(dir / "data_batch_3.bin", b);
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { cifar10(dir.path(), Split::Train); }),
                          (dir / "data_batch_3.bin").string(), "size 3173 is not a multiple",
                          "record at offset 3073 is truncated (100 of 3073 bytes)");
  for (std::size_t cut : {1u, 3072u}) {
    TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_cifar(Bytes(cut, 0), "c.bin"); }), "c.bin",
                            "record at offset 0 is truncated");
  }
}

TEST(Cifar, EmptyMissingAndBadLabel) {
  TempDir dir;
  write_cifar_dir(dir.path());
  write_file(dir / "test_batch.bin", {});
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { cifar10(dir.path(), Split::Test); }),
                          (dir / "test_batch.bin").string(), "empty file (offset 0)");
  Bytes b = cifar_records(3);
  b[std::size_t{2} * 3073] = 10;
  write_file(dir / "test_batch.bin", b);
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { cifar10(dir.path(), Split::Test); }),
                          (dir / "test_batch.bin").string(), "label 10 at offset 6146 (record 2)");
  std::filesystem::remove(dir / "data_batch_4.bin");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { cifar10(dir.path(), Split::Train); }),
                          (dir / "data_batch_4.bin").string(), "does not exist");
}

// ---------------- CSV ----------------

TEST(Csv, HeaderFeaturesAndLabels) {
  TempDir dir;
  write_text(dir / "a.csv", "f1,f2,label\n1,2,0\n3.5, -4e2 ,1\n\n+0.25,1e-3,2\n");
  TensorDataset ds = csv_dataset(dir / "a.csv");
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.data().shape(), (Shape{3, 2}));
  EXPECT_EQ(ds.data().dtype(), DType::Float32);
  EXPECT_EQ(ds.data().to_vector<float>(), (std::vector<float>{1, 2, 3.5f, -400, 0.25f, 1e-3f}));
  EXPECT_EQ(ds.targets().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(ds.num_classes(), 3);
  const CsvTable t = parse_csv("f1,f2,label\n1,2,0\n", "a");
  EXPECT_EQ(t.header, (std::vector<std::string>{"f1", "f2", "label"}));
}

TEST(Csv, LabelColumnHeaderModesCrlfAndBom) {
  CsvTable t = parse_csv(
      "\xEF\xBB\xBF"
      "1;0.5;0.75\r\n0;1.5;2\r\n",
      "b", {.label_column = 0, .header = CsvHeader::Absent, .delimiter = ';'});
  EXPECT_EQ(t.rows, 2);
  EXPECT_EQ(t.values, (std::vector<float>{0.5f, 0.75f, 1.5f, 2.0f}));
  EXPECT_EQ(t.labels, (std::vector<std::int64_t>{1, 0}));
  t = parse_csv("9,9,9\n1,2,1\n", "c", {.header = CsvHeader::Present, .num_classes = 4});
  EXPECT_EQ(t.rows, 1);
  EXPECT_EQ(t.num_classes, 4);
  t = parse_csv("1,2,1\n", "d");  // Auto: an all-number first row is data
  EXPECT_EQ(t.rows, 1);
}

TEST(Csv, RaggedRowsNameLineAndText) {
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("a,b,c\n1,2,0\n3,4\n", "r.csv"); }),
                          "r.csv:3:4: row has 2 fields, expected 3 (as on line 1)", "'3,4'");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,2,3,4\n", "r.csv"); }),
                          "r.csv:2:7: row has 4 fields, expected 3", "'1,2,3,4'");
}

TEST(Csv, NonNumericEmptyAndNonFiniteFields) {
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("x,y,l\n1,abc,0\n", "n.csv"); }),
                          "n.csv:2:3: field 2 'abc' is not a number");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,,0\n", "e.csv"); }),
                          "e.csv:2:3: field 2 '' is empty");
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity"}) {
    const std::string text = std::string("1,2,0\n") + bad + ",2,0\n";
    TANDEM_EXPECT_ERROR_HAS(error_of([&] { parse_csv(text, "f.csv"); }),
                            std::string("f.csv:2:1: field 1 '") + bad + "' is not a finite number");
  }
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1e39,2,0\n", "o.csv"); }),
                          "o.csv:2:1: field 1 '1e39' is outside the float32 range");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,1e400,0\n", "o.csv"); }),
                          "o.csv:2:3: field 2 '1e400' is out of range");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,2,\x01z\n", "c.csv"); }),
                          "c.csv:2:5: field 3 '\\x01z' is not a number");
}

TEST(Csv, BadLabels) {
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,2,1.5\n", "l.csv"); }),
                          "l.csv:2:5: field 3 '1.5'", "non-negative integer");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,-1\n", "l.csv"); }),
                          "l.csv:1:5: field 3 '-1'", "non-negative integer");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,4\n", "l.csv", {.num_classes = 4}); }),
                          "l.csv:1:5: field 3 '4'", "outside [0, 4)");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("7,1,2\n", "l.csv", {.label_column = 3}); }),
                          "l.csv:1:1: label column 3 is outside the 3 columns");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("7\n", "l.csv"); }), "l.csv:1:1: 1 column(s)");
  // The class count (largest label + 1) sizes a model's output layer: labels are bounded.
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("1,2,0\n1,2,2147483647\n", "l.csv"); }),
                          "l.csv:2:5: field 3 '2147483647'", "below 65536");
  EXPECT_EQ(parse_csv("1,2,65535\n", "l.csv").num_classes, kMaxCsvClasses);
}

TEST(Csv, EmptyFilesAndHeaderOnly) {
  TempDir dir;
  write_text(dir / "empty.csv", "");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { csv_dataset(dir / "empty.csv"); }),
                          (dir / "empty.csv").string() + ":1: empty file");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("\n  \n\r\n", "blank.csv"); }),
                          "blank.csv:1: empty file");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { parse_csv("\na,b,label\n", "h.csv"); }),
                          "h.csv:2: no data rows after the header");
}

}  // namespace
}  // namespace tandem::data
