// End to end: `tandem train --devices cpu:2 --tensorboard` writes report.html, headless Chromium
// renders it (a screenshot kept under the test's work directory, and the rendered DOM), and the
// page shows the figures of metrics.jsonl; `tandem report` rebuilds it, also for a crashed run;
// the TensorBoard events carry the same losses. Chromium missing is a failure, not a skip.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "event_reader.h"
#include "tandem/report/share.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
namespace rp = tandem::report;

constexpr const char* kChromium = "/usr/bin/chromium";
constexpr const char* kRun =
    "train --model mlp --data synthetic:1x8x8:4:96 --batch-size 16 --workers 1 --epochs 2 "
    "--devices cpu:2";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<Json> lines_of_kind(const fs::path& metrics, const std::string& kind) {
  std::vector<Json> out;
  std::istringstream in(slurp(metrics));
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("kind", "") == kind) out.push_back(j);
  }
  return out;
}

// An 8-bit RGB or RGBA PNG's pixels, unfiltered (enough for Chromium's screenshots).
struct Image {
  std::uint32_t width = 0, height = 0, channels = 0;
  std::vector<unsigned char> pixels;  // rows of width * channels bytes
};

std::uint32_t big_endian(const std::string& b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

Image decode_png(const std::string& png) {
  Image image;
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return image;
  std::string idat;
  for (std::size_t at = 8; at + 8 <= png.size();) {
    const std::uint32_t length = big_endian(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (type == "IHDR") {
      image.width = big_endian(png, at + 8);
      image.height = big_endian(png, at + 12);
      const int colour = static_cast<unsigned char>(png[at + 17]);
      if (png[at + 16] != 8 || (colour != 2 && colour != 6) || png[at + 20] != 0) return Image{};
      image.channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, length);
    }
    at += 12 + length;
  }
  const std::size_t stride = static_cast<std::size_t>(image.width) * image.channels;
  std::vector<unsigned char> raw((stride + 1) * image.height);
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      size != raw.size()) {
    return Image{};
  }
  image.pixels.assign(stride * image.height, 0);
  const std::size_t bpp = image.channels;
  for (std::size_t y = 0; y < image.height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* in = &raw[y * (stride + 1) + 1];
    unsigned char* out = &image.pixels[y * stride];
    const unsigned char* up = y > 0 ? &image.pixels[(y - 1) * stride] : nullptr;
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? out[x - bpp] : 0;
      const int b = up ? up[x] : 0;
      const int c = up && x >= bpp ? up[x - bpp] : 0;
      int predictor = 0;
      switch (filter) {
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: break;
      }
      out[x] = static_cast<unsigned char>(in[x] + predictor);
    }
  }
  return image;
}

// Pixels within 3 of the colour #rrggbb in each channel.
std::size_t count_colour(const Image& image, unsigned rgb) {
  std::size_t n = 0;
  for (std::size_t i = 0; i + 2 < image.pixels.size(); i += image.channels) {
    const int r = image.pixels[i], g = image.pixels[i + 1], b = image.pixels[i + 2];
    n += std::abs(r - static_cast<int>(rgb >> 16)) <= 3 &&
         std::abs(g - static_cast<int>(rgb >> 8 & 0xFF)) <= 3 &&
         std::abs(b - static_cast<int>(rgb & 0xFF)) <= 3;
  }
  return n;
}

class ReportEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(TANDEM_TEST_WORK_DIR) / info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Runs `command` in the test's directory; stdout into out_, the exit status returned.
  int shell(const std::string& command) {
    const std::string line = "cd '" + dir_.string() + "' && " + command + " > out.txt 2> err.txt";
    const int raw = std::system(line.c_str());
    out_ = slurp(dir_ / "out.txt");
    err_ = slurp(dir_ / "err.txt");
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  }
  int tandem(const std::string& args) {
    return shell("OMP_NUM_THREADS=1 '" + std::string(TANDEM_BINARY) + "' " + args);
  }
  // Headless Chromium on `page` with `action` (--dump-dom, or --screenshot=FILE).
  int chromium(const fs::path& page, const std::string& action) {
    const fs::path profile = dir_ / "chromium-profile";
    fs::remove_all(profile);
    return shell(std::string("timeout 60 ") + kChromium +
                 " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                 " --disable-background-networking --disable-component-update --disable-sync"
                 " --user-data-dir='" + profile.string() + "' --window-size=1280,2400 " + action +
                 " 'file://" + fs::absolute(page).string() + "'");
  }

  fs::path dir_;
  std::string out_, err_;
};

TEST_F(ReportEndToEnd, TrainedOnTwoReplicasChromiumShowsTheMetrics) {
  ASSERT_TRUE(fs::exists(kChromium))
      << kChromium << " is missing: the report test needs Debian's chromium (scripts/install-deps "
      << "installs it with fonts-dejavu-core)";
  ASSERT_EQ(tandem(std::string(kRun) + " --out run"), 0) << err_;
  // The end of training prints the share table.
  EXPECT_NE(out_.find("==> report: run/report.html"), std::string::npos) << out_;
  EXPECT_NE(out_.find("device  samples  samples %"), std::string::npos) << out_;
  const fs::path page = dir_ / "run/report.html";
  const std::string written = slurp(page);
  ASSERT_FALSE(written.empty());

  // `tandem report` rebuilds the same page from metrics.jsonl alone.
  fs::remove(page);
  ASSERT_EQ(tandem("report run"), 0) << err_;
  EXPECT_NE(out_.find("run/report.html"), std::string::npos) << out_;
  EXPECT_EQ(slurp(page), written);

  // The figures metrics.jsonl holds, as the page should show them.
  const fs::path metrics = dir_ / "run/metrics.jsonl";
  const std::vector<Json> runs = lines_of_kind(metrics, "run");
  const std::vector<Json> steps = lines_of_kind(metrics, "step");
  const std::vector<Json> epochs = lines_of_kind(metrics, "epoch");
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(steps.size(), 12u);
  ASSERT_EQ(epochs.size(), 2u);
  std::vector<std::string> expected = {
      "Training report",
      rp::format_count(runs[0]["parameters"].get<std::int64_t>()),
      "cpu:0,cpu:1",
      "12 of 12",
      rp::format_fixed(epochs.back()["loss"].get<double>(), 4),
      rp::format_percent(epochs.back()["test_accuracy"].get<double>(), 2),
      rp::format_percent(epochs.back()["train_accuracy"].get<double>(), 2),
  };
  std::int64_t samples[2] = {0, 0};
  double busy[2] = {0, 0};
  for (const Json& s : steps) {
    for (int d = 0; d < 2; ++d) {
      const Json& dev = s["devices"][d];
      samples[d] += dev["samples"].get<std::int64_t>();
      busy[d] += dev["forward_s"].get<double>() + dev["backward_s"].get<double>() +
                 dev["reduction_s"].get<double>() + dev["optimizer_s"].get<double>();
    }
  }
  for (int d = 0; d < 2; ++d) {
    expected.push_back(rp::format_count(samples[d]) + " samples");
    expected.push_back(rp::format_percent(static_cast<double>(samples[d]) /
                                          static_cast<double>(samples[0] + samples[1])));
  }
  expected.push_back(std::string("Slowest device: <strong>") + (busy[1] > busy[0] ? "cpu:1" : "cpu:0"));
  const Json& confusion = epochs.back()["confusion"];
  ASSERT_EQ(confusion.size(), 4u);
  std::int64_t evaluated = 0;
  for (const Json& row : confusion) {
    for (const Json& v : row) evaluated += v.get<std::int64_t>();
  }
  EXPECT_EQ(evaluated, runs[0]["test_samples"].get<std::int64_t>());
  expected.push_back("target 0, predicted 0: " + std::to_string(confusion[0][0].get<std::int64_t>()));
  expected.push_back("target 3, predicted 2: " + std::to_string(confusion[3][2].get<std::int64_t>()));

  // Rendered: what Chromium made of the page.
  ASSERT_EQ(chromium(page, "--dump-dom"), 0) << err_;
  const std::string dom = out_;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << dom.substr(0, 500);
  for (const std::string& figure : expected) EXPECT_NE(dom.find(figure), std::string::npos) << figure;

  const fs::path screenshot = dir_ / "report.png";
  ASSERT_EQ(chromium(page, "--screenshot='" + screenshot.string() + "'"), 0) << err_;
  const Image image = decode_png(slurp(screenshot));
  EXPECT_EQ(image.width, 1280u);
  EXPECT_EQ(image.height, 2400u);
  // Both devices' slices (and bars) are painted in their palette colours.
  EXPECT_GT(count_colour(image, 0x0072B2), 2000u);
  EXPECT_GT(count_colour(image, 0xE69F00), 2000u);
  std::cout << "screenshot: " << screenshot.string() << "\n";
}

TEST_F(ReportEndToEnd, TensorBoardEventsCarryTheSameCurves) {
  ASSERT_EQ(tandem(std::string(kRun) + " --tensorboard --out run"), 0) << err_;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir_ / "run")) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) files.push_back(entry.path());
  }
  ASSERT_EQ(files.size(), 1u);
  const std::vector<tandem::testing::ReadEvent> events = tandem::testing::read_event_file(files[0].string());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  const std::vector<Json> steps = lines_of_kind(dir_ / "run/metrics.jsonl", "step");
  const std::vector<Json> epochs = lines_of_kind(dir_ / "run/metrics.jsonl", "epoch");
  std::size_t step_events = 0, epoch_events = 0;
  for (const auto& e : events) {
    if (const auto it = e.scalars.find("train/loss"); it != e.scalars.end()) {
      const Json& s = steps.at(step_events++);
      EXPECT_EQ(e.step, s["step"].get<std::int64_t>());
      EXPECT_EQ(it->second, static_cast<float>(s["loss"].get<double>()));
      EXPECT_EQ(e.scalars.at("train/lr"), static_cast<float>(s["lr"].get<double>()));
    }
    if (const auto it = e.scalars.find("epoch/test_accuracy"); it != e.scalars.end()) {
      const Json& m = epochs.at(epoch_events++);
      EXPECT_EQ(e.step, m["step"].get<std::int64_t>());
      EXPECT_EQ(it->second, static_cast<float>(m["test_accuracy"].get<double>()));
    }
  }
  EXPECT_EQ(step_events, steps.size());
  EXPECT_EQ(epoch_events, epochs.size());
  EXPECT_EQ(Json::parse(slurp(dir_ / "run/config.json"))["tensorboard"], true);
}

TEST_F(ReportEndToEnd, ACrashedRunGetsAReportToo) {
  ASSERT_EQ(tandem(std::string(kRun) + " --out run --test-kill-at-step 5"), 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(dir_ / "run/report.html"));  // the first epoch never ended
  std::ofstream(dir_ / "run/metrics.jsonl", std::ios::app) << "{\"kind\":\"step\",\"st";
  ASSERT_EQ(tandem("report run"), 0) << err_;
  EXPECT_NE(out_.find("1 unreadable line(s) of metrics.jsonl skipped, the first at line 7"),
            std::string::npos) << out_;
  const std::string page = slurp(dir_ / "run/report.html");
  EXPECT_NE(page.find("Stopped at step 5 of 12"), std::string::npos);
  EXPECT_NE(page.find("No evaluation yet"), std::string::npos);
  EXPECT_NE(page.find("1 unreadable, skipped, the first at line 7"), std::string::npos);
  // No stray temporary from the atomic write.
  for (const auto& entry : fs::directory_iterator(dir_ / "run")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST_F(ReportEndToEnd, AMissingRunDirectoryIsOneLineAndStatus2) {
  EXPECT_EQ(tandem("report nowhere"), 2);
  EXPECT_TRUE(err_.starts_with("tandem report: error: report: cannot read 'nowhere/metrics.jsonl' "
                               "(is it a run directory?)"))
      << err_;
  EXPECT_EQ(std::count(err_.begin(), err_.end(), '\n'), 1) << err_;
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
  EXPECT_EQ(tandem("report"), 2);
  EXPECT_NE(err_.find("RUN_DIR is required"), std::string::npos) << err_;
}

}  // namespace
