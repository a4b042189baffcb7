// Console output: stage lines, the terminal progress bar and plain progress lines.
#include "tandem/train/progress.h"

#include <chrono>
#include <cmath>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace tandem::train {
namespace {

using Json = nlohmann::ordered_json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr int kBarWidth = 24;
constexpr std::int64_t kLinesPerEpoch = 10;

}  // namespace

ConsoleStyle console_style_for(std::FILE* stream, bool json) {
  if (json) return ConsoleStyle::Json;
  return ::isatty(::fileno(stream)) ? ConsoleStyle::Bar : ConsoleStyle::Lines;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto total = static_cast<std::int64_t>(std::llround(seconds));
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return buffer;
}

Console::Console(std::FILE* out, std::FILE* err, ConsoleStyle style)
    : out_(out), err_(err), style_(style) {}

Console::~Console() { end_progress(); }

void Console::stage(const std::string& name, const std::string& detail) {
  end_progress();
  if (style_ == ConsoleStyle::Json) {
    std::fprintf(out_, "%s\n", Json{{"event", "stage"}, {"stage", name}, {"detail", detail}}.dump().c_str());
  } else {
    std::fprintf(out_, "==> %s: %s\n", name.c_str(), detail.c_str());
  }
  std::fflush(out_);
}

void Console::note(const std::string& text) {
  end_progress();
  if (style_ == ConsoleStyle::Json) {
    std::fprintf(out_, "%s\n", Json{{"event", "note"}, {"text", text}}.dump().c_str());
  } else {
    std::fprintf(out_, "    %s\n", text.c_str());
  }
  std::fflush(out_);
}

void Console::warning(const std::string& text) {
  end_progress();
  std::fprintf(err_, "warning: %s\n", text.c_str());
  std::fflush(err_);
}

void Console::progress(const ProgressUpdate& u) {
  const bool last_of_epoch = u.batch == u.batches;
  const bool last = u.total_steps > 0 && u.step >= u.total_steps;
  if (style_ == ConsoleStyle::Bar) {
    const double t = now_seconds();
    if (!last && !last_of_epoch && last_draw_ >= 0 && t - last_draw_ < 0.1) return;
    last_draw_ = t;
    const double fraction =
        u.total_steps > 0 ? static_cast<double>(u.step) / static_cast<double>(u.total_steps) : 0;
    const int filled = static_cast<int>(fraction * kBarWidth);
    std::string bar(static_cast<std::size_t>(kBarWidth), ' ');
    for (int i = 0; i < filled && i < kBarWidth; ++i) bar[static_cast<std::size_t>(i)] = '=';
    if (filled < kBarWidth) bar[static_cast<std::size_t>(filled)] = '>';
    std::fprintf(out_, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f img/s  ETA %s",
                 static_cast<long long>(u.epoch), static_cast<long long>(u.epochs), bar.c_str(),
                 static_cast<long long>(u.step), static_cast<long long>(u.total_steps), u.loss,
                 u.images_per_s, format_duration(u.eta_seconds).c_str());
    std::fflush(out_);
    bar_open_ = true;
    if (last_of_epoch || last) end_progress();
    return;
  }
  const std::int64_t every = std::max<std::int64_t>(1, u.batches / kLinesPerEpoch);
  if (!(u.batch % every == 0 || last_of_epoch || last || u.step == 1)) return;
  if (style_ == ConsoleStyle::Json) {
    std::fprintf(out_, "%s\n",
                 Json{{"event", "progress"}, {"step", u.step}, {"total_steps", u.total_steps},
                      {"epoch", u.epoch}, {"loss", u.loss}, {"lr", u.lr},
                      {"images_per_s", u.images_per_s}, {"eta_s", u.eta_seconds}}
                     .dump()
                     .c_str());
  } else {
    std::fprintf(out_, "    step %lld/%lld  epoch %lld/%lld  loss %.4f  lr %.3g  %.0f img/s  ETA %s\n",
                 static_cast<long long>(u.step), static_cast<long long>(u.total_steps),
                 static_cast<long long>(u.epoch), static_cast<long long>(u.epochs), u.loss, u.lr,
                 u.images_per_s, format_duration(u.eta_seconds).c_str());
  }
  std::fflush(out_);
}

void Console::end_progress() {
  if (bar_open_) {
    std::fputs("\n", out_);
    std::fflush(out_);
    bar_open_ = false;
  }
}

}  // namespace tandem::train
