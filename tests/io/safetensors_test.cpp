// Tests of the safetensors reader and writer: round trips of every dtype, a file PyTorch wrote,
// atomic saves, and hostile files (truncated, inconsistent, oversized), each of which must raise a
// tandem::Error naming the file and the field rather than crash or allocate blindly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "golden.h"
#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using io::from_safetensors_buffer;
using io::load_safetensors;
using io::save_safetensors;
using io::to_safetensors_buffer;
using testing::allclose;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_safetensors_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes to a file in the test directory and returns its path.
  std::string write_file(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    std::string p = path(name);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  fs::path dir_;
};

// A file of the given header text (padded to 8 bytes as writers do) and data bytes.
std::vector<std::uint8_t> craft(std::string header, const std::vector<std::uint8_t>& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t n = header.size();
  std::vector<std::uint8_t> out(8 + header.size() + data.size());
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  return out;
}

// The message of the tandem::Error that loading `path` raises ("" if it loads).
std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Passes when `message` is one printable line that contains every part.
::testing::AssertionResult mentions(const std::string& message,
                                    const std::vector<std::string>& parts) {
  if (message.empty()) return ::testing::AssertionFailure() << "loaded without an error";
  for (const char c : message) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return ::testing::AssertionFailure()
             << "error \"" << message << "\" is not one line of ASCII";
    }
  }
  for (const auto& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "error \"" << message << "\" does not mention \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

nn::StateDict all_dtypes() {
  std::vector<BFloat16> bf(6);
  for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = BFloat16(0.375f * static_cast<float>(i) - 1);
  std::vector<std::uint8_t> u8 = {0, 1, 127, 128, 255};
  return {
      {"f32", from_vector(std::vector<float>{1.5f, -2.25f, 3e-8f, 7e30f, 0.0f, -0.0f}, {2, 3})},
      {"f64", from_vector(std::vector<double>{1.0 / 3.0, -1e300, 2.5, 4.0}, {4},
                          {.dtype = DType::Float64})},
      {"bf16", from_host(bf.data(), DType::BFloat16, {3, 2})},
      {"i64", from_vector(std::vector<std::int64_t>{-9'000'000'000'000'000'000, 0, 42}, {3})},
      {"u8", from_host(u8.data(), DType::UInt8, {5, 1})},
      {"scalar", scalar_tensor(-4.5, {.dtype = DType::Float64})},
      {"empty", zeros({0, 3})},
      {"layer.0.weight", from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}).t()},
  };
}

// Same names, dtypes, shapes and bytes.
void expect_same(const nn::StateDict& expected, const nn::StateDict& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, want] = expected[i];
    const auto& [got_name, got] = actual[i];
    EXPECT_EQ(name, got_name);
    EXPECT_EQ(want.dtype(), got.dtype()) << name;
    EXPECT_EQ(want.shape(), got.shape()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    Tensor w = contiguous_copy(want);
    ASSERT_EQ(w.nbytes(), got.nbytes()) << name;
    if (w.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(w.raw_data(), got.raw_data(), w.nbytes()), 0) << name;
    }
  }
}

TEST_F(Safetensors, RoundTripsEveryDtypeThroughAFile) {
  const nn::StateDict state = all_dtypes();
  const io::Metadata meta = {{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
  const std::string p = path("model.safetensors");
  save_safetensors(p, state, meta);
  io::LoadedTensors loaded = load_safetensors(p);
  expect_same(state, loaded.tensors);
  EXPECT_EQ(loaded.metadata, meta);
  EXPECT_EQ(loaded.tensors[7].second.at({0, 2}), 5.0);  // the transposed tensor, stored contiguous
  EXPECT_EQ(loaded.tensors[5].second.dim(), 0);
  EXPECT_EQ(loaded.tensors[5].second.item(), -4.5);
  EXPECT_EQ(loaded.tensors[6].second.numel(), 0);
}

TEST_F(Safetensors, BufferAndFileHoldTheSameBytes) {
  const nn::StateDict state = all_dtypes();
  const std::string p = path("model.safetensors");
  save_safetensors(p, state, {{"k", "v"}});
  std::vector<std::uint8_t> bytes = to_safetensors_buffer(state, {{"k", "v"}});
  std::ifstream in(p, std::ios::binary);
  std::vector<std::uint8_t> file((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, file);
  // The header is padded so that the data buffer starts 8-byte aligned.
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  expect_same(state, from_safetensors_buffer(bytes).tensors);
}

TEST_F(Safetensors, EmptyStateDictRoundTrips) {
  std::vector<std::uint8_t> bytes = to_safetensors_buffer({});
  EXPECT_EQ(bytes.size(), 16u);  // "{}" padded to 8
  io::LoadedTensors loaded = from_safetensors_buffer(bytes);
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST_F(Safetensors, SaveReplacesAtomicallyAndLeavesNoTemporary) {
  const std::string p = path("w.safetensors");
  save_safetensors(p, {{"a", ones({4})}});
  save_safetensors(p, {{"b", zeros({2, 2})}});
  io::LoadedTensors loaded = load_safetensors(p);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].first, "b");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"w.safetensors"});
}

TEST_F(Safetensors, SaveIntoAMissingDirectoryFailsWithoutLeavingAFile) {
  const std::string p = path("missing/w.safetensors");
  try {
    save_safetensors(p, {{"a", ones({1})}});
    FAIL() << "saved into a missing directory";
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e.what(), {p, "cannot create"}));
  }
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(Safetensors, SaveRejectsBadNames) {
  const std::string p = path("bad.safetensors");
  auto save_error = [&](const nn::StateDict& state) {
    try {
      save_safetensors(p, state);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(mentions(save_error({{"a", ones({1})}, {"a", ones({1})}}), {p, "name", "duplicate"}));
  EXPECT_TRUE(mentions(save_error({{"__metadata__", ones({1})}}), {p, "reserved"}));
  EXPECT_TRUE(mentions(save_error({{"", ones({1})}}), {p, "empty name"}));
  EXPECT_TRUE(mentions(save_error({{"u", Tensor()}}), {p, "\"u\"", "undefined"}));
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(Safetensors, LoadsTheFileWrittenFromPyTorch) {
  const std::string p = testing::golden_path("io_dtypes.safetensors");
  io::LoadedTensors loaded = load_safetensors(p);
  // File order (the writer sorts the header's keys, so this is the data_offsets order).
  std::vector<std::string> names;
  for (const auto& [name, t] : loaded.tensors) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"f32", "f64", "bf16", "i64", "u8", "scalar", "empty"}));
  EXPECT_EQ(loaded.metadata.at("generator"), "tools/gen_golden.py");
  EXPECT_EQ(loaded.metadata.at("purpose"), "io test");

  const auto& t = loaded.tensors;
  auto values = [](std::int64_t n, auto f) {
    std::vector<double> out;
    for (std::int64_t i = 0; i < n; ++i) out.push_back(f(static_cast<double>(i)));
    return out;
  };
  EXPECT_EQ(t[0].second.dtype(), DType::Float32);
  EXPECT_EQ(t[0].second.shape(), (Shape{2, 3}));
  EXPECT_TRUE(allclose(t[0].second, values(6, [](double i) { return i * 0.5 - 1.0; }), 0, 0));
  EXPECT_EQ(t[1].second.dtype(), DType::Float64);
  EXPECT_EQ(t[1].second.shape(), (Shape{4}));
  EXPECT_TRUE(allclose(t[1].second, values(4, [](double i) { return i / 3.0; }), 0, 0));
  EXPECT_EQ(t[2].second.dtype(), DType::BFloat16);
  EXPECT_EQ(t[2].second.shape(), (Shape{2, 2, 2}));
  EXPECT_TRUE(allclose(t[2].second, values(8, [](double i) { return i * 0.25 - 1.0; }), 0, 0));
  EXPECT_EQ(t[3].second.dtype(), DType::Int64);
  EXPECT_EQ(t[3].second.shape(), (Shape{5, 1}));
  std::vector<std::int64_t> want_i64;
  for (std::int64_t i = 0; i < 5; ++i) want_i64.push_back(i * 1000000007 - 2);
  EXPECT_EQ(t[3].second.to_vector<std::int64_t>(), want_i64);
  EXPECT_EQ(t[4].second.dtype(), DType::UInt8);
  EXPECT_EQ(t[4].second.shape(), (Shape{10}));
  EXPECT_TRUE(
      allclose(t[4].second, values(10, [](double i) { return std::fmod(i * 29, 256); }), 0, 0));
  EXPECT_EQ(t[5].second.dim(), 0);
  EXPECT_EQ(t[5].second.item(), 3.25);
  EXPECT_EQ(t[6].second.shape(), (Shape{0, 3}));
}

TEST_F(Safetensors, LoadsAGoldenTrainingFileInPyTorchsStateDictOrder) {
  io::LoadedTensors loaded = load_safetensors(testing::golden_path("train_mlp_sgd.safetensors"));
  std::vector<std::string> names;
  for (const auto& [name, t] : loaded.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"losses", "final.fc1.weight", "final.fc1.bias",
                                             "final.fc2.weight", "final.fc2.bias"}));
  EXPECT_EQ(loaded.tensors[1].second.shape(), (Shape{50, 100}));
  EXPECT_EQ(loaded.tensors[0].second.shape(), (Shape{5}));
}

// ---- hostile files ----

TEST_F(Safetensors, EveryTruncationOfAValidFileIsAnError) {
  const std::vector<std::uint8_t> valid = to_safetensors_buffer(
      {{"w", from_vector(std::vector<float>{1, 2, 3}, {3})}, {"b", full({2}, 7.0)}}, {{"k", "v"}});
  ASSERT_NO_THROW(from_safetensors_buffer(valid));
  const std::string p = path("truncated.safetensors");
  for (std::size_t n = 0; n < valid.size(); ++n) {
    std::vector<std::uint8_t> cut(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n));
    write_file("truncated.safetensors", cut);
    const std::string message = load_error(p);
    EXPECT_TRUE(mentions(message, {p})) << "truncated to " << n << " bytes";
    if (n < 8) {
      EXPECT_TRUE(mentions(message, {"file size", std::to_string(n)}));
    }
    EXPECT_THROW(from_safetensors_buffer(cut.data(), cut.size()), Error) << n;
  }
}

TEST_F(Safetensors, HeaderLengthBeyondTheFileIsAnError) {
  std::vector<std::uint8_t> bytes = craft("{}", {});
  const std::uint64_t huge = 0x7fff'ffff'ffff'fff0ull;
  std::memcpy(bytes.data(), &huge, 8);
  const std::string p = write_file("huge.safetensors", bytes);
  EXPECT_TRUE(mentions(load_error(p), {p, "header length", std::to_string(huge)}));

  bytes = craft("{}", {});
  bytes[0] = 9;  // 9 header bytes, 8 present
  const std::string q = write_file("long.safetensors", bytes);
  EXPECT_TRUE(mentions(load_error(q), {q, "header length", "9"}));
}

TEST_F(Safetensors, HeaderLengthOverTheLimitIsAnErrorEvenWhenTheFileIsThatLong) {
  // A sparse 200 MB file whose header claims 150 MB: rejected before anything is read.
  const std::string p = path("sparse.safetensors");
  std::vector<std::uint8_t> prefix(8);
  const std::uint64_t n = 150'000'000;
  std::memcpy(prefix.data(), &n, 8);
  write_file("sparse.safetensors", prefix);
  fs::resize_file(p, 200'000'000);
  EXPECT_TRUE(mentions(load_error(p), {p, "header length", "150000000", "limit"}));
}

TEST_F(Safetensors, HeaderThatIsNotAJsonObjectIsAnError) {
  std::string p = write_file("bad_json.safetensors", craft("{\"a\": {\"dtype\": ", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "header", "not valid JSON"}));
  p = write_file("array.safetensors", craft("[1, 2]", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "header", "JSON object", "[1,2]"}));
  p = write_file("not_utf8.safetensors", craft("{\"\xff\": 1}", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "header", "not valid JSON"}));
  p = write_file("entry.safetensors", craft(R"({"a": 3})", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "3"}));
  p = write_file("missing.safetensors", craft(R"({"a": {"shape": [], "data_offsets": [0, 4]}})",
                                              std::vector<std::uint8_t>(4)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "\"dtype\"", "missing"}));
}

// Errors quote the offending value, and printing one nested 100000 deep would recurse past the
// stack; such a header is refused by its depth first.
TEST_F(Safetensors, DeeplyNestedHeaderIsAnErrorNotAStackOverflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string p = write_file("deep.safetensors", craft(deep, {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "header", "nested deeper than 32"}));
  p = write_file("deep_entry.safetensors", craft("{\"a\": " + deep + "}", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "header", "nested deeper than 32"}));
}

TEST_F(Safetensors, UnknownAndUnsupportedDtypesAreErrors) {
  std::string p = write_file(
      "q7.safetensors", craft(R"({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})",
                              std::vector<std::uint8_t>(4)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "dtype", "unknown dtype", "Q7"}));
  p = write_file("f16.safetensors",
                 craft(R"({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})",
                       std::vector<std::uint8_t>(4)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"h\"", "dtype", "unsupported dtype", "F16"}));
  p = write_file("num.safetensors",
                 craft(R"({"h": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})",
                       std::vector<std::uint8_t>(4)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"h\"", "dtype", "4"}));
}

TEST_F(Safetensors, BadShapesAreErrors) {
  std::string p =
      write_file("neg.safetensors",
                 craft(R"({"a": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}})", {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "shape", "-3"}));
  p = write_file("frac.safetensors",
                 craft(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
                       std::vector<std::uint8_t>(4)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "shape", "1.5"}));
  p = write_file(
      "overflow.safetensors",
      craft(R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})",
            {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "shape", "4294967296", "more elements"}));
  // Overflowing dimensions beside a zero still fail: no later element count may overflow.
  p = write_file("overflow_zero.safetensors",
                 craft(R"({"a": {"dtype": "U8", "shape": [18446744073709551615, 2, 0],
                      "data_offsets": [0, 0]}})",
                       {}));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "shape", "more elements"}));
  p = write_file("shape_obj.safetensors",
                 craft(R"({"a": {"dtype": "U8", "shape": {"x": 1}, "data_offsets": [0, 1]}})",
                       std::vector<std::uint8_t>(1)));
  EXPECT_TRUE(mentions(load_error(p), {p, "tensor \"a\"", "shape", "expected an array"}));
}

TEST_F(Safetensors, BadDataOffsetsAreErrors) {
  const std::vector<std::uint8_t> data(8);
  struct Case {
    const char* name;
    std::string header;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"one_offset",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})",
       {"tensor \"a\"", "data_offsets", "[0]"}},
      {"string_offset",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, "8"]}})",
       {"tensor \"a\"", "data_offsets", "\"8\""}},
      {"negative_offset",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})",
       {"tensor \"a\"", "data_offsets", "-8"}},
      {"reversed",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
       {"tensor \"a\"", "data_offsets", "begin 8 is after end 0"}},
      {"beyond",
       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
       {"tensor \"a\"", "data_offsets", "end 16", "8 bytes"}},
      {"wrong_count",
       R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
       {"tensor \"a\"", "data_offsets", "8 bytes", "needs 12"}},
      {"overlap",
       R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
       {"tensor \"b\"", "data_offsets", "[4, 8]", "overlaps tensor \"a\""}},
      {"gap",
       R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
           "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
       {"tensor \"b\"", "data_offsets", "gap of 2 bytes", "tensor \"a\""}},
      {"gap_at_start",
       R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
       {"tensor \"a\"", "data_offsets", "gap of 4 bytes", "buffer start"}},
      {"trailing",
       R"({"a": {"dtype": "U8", "shape": [6], "data_offsets": [0, 6]}})",
       {"file size", "2 trailing bytes"}},
      {"duplicate",
       R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       {"name", "duplicate tensor name \"a\""}},
      {"duplicate_field",
       R"({"a": {"dtype": "F32", "dtype": "U8", "shape": [2], "data_offsets": [0, 8]}})",
       {"\"dtype\"", "twice"}},
      {"metadata_value",
       R"({"__metadata__": {"k": 1}, "a": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}})",
       {"__metadata__", "\"k\"", "not a string"}},
  };
  for (const Case& c : cases) {
    const std::string p = write_file(std::string(c.name) + ".safetensors", craft(c.header, data));
    std::vector<std::string> parts = c.parts;
    parts.push_back(p);
    EXPECT_TRUE(mentions(load_error(p), parts)) << c.name;
  }
}

TEST_F(Safetensors, MissingFileIsAnErrorNamingIt) {
  const std::string p = path("nope.safetensors");
  EXPECT_TRUE(mentions(load_error(p), {p, "cannot open"}));
}

TEST_F(Safetensors, RandomCorruptionsLoadOrRaiseButNeverCrash) {
  const std::vector<std::uint8_t> valid =
      to_safetensors_buffer({{"conv.weight", from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2})},
                             {"conv.bias", from_vector(std::vector<std::int64_t>{5, 6}, {2})},
                             {"s", scalar_tensor(1.0, {.dtype = DType::BFloat16})}},
                            {{"k", "v"}});
  std::mt19937 rng(1234);
  int loaded = 0;
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint8_t> bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      // Mostly printable changes inside the header, so that the JSON often still parses.
      bytes[at] = static_cast<std::uint8_t>(rng() % 2 ? '0' + rng() % 10 : rng() % 256);
    }
    try {
      io::LoadedTensors result = from_safetensors_buffer(bytes, "fuzz");
      ++loaded;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("\"fuzz\""), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_EQ(loaded + rejected, 3000);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);  // edits of the data bytes leave a valid file
}

}  // namespace
}  // namespace tandem
