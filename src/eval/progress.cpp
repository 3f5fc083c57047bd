// Progress bar / periodic progress lines with rate and ETA.
#include "eval/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco::eval {
namespace {

// "42s", "3m05s", "1h02m".
std::string format_seconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char buf[32];
  if (t < 60)
    std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

struct ProgressModeName {
  ProgressMode mode;
  const char* name;
};
constexpr ProgressModeName kProgressModes[] = {{ProgressMode::kOff, "off"},
                                               {ProgressMode::kAuto, "auto"},
                                               {ProgressMode::kBar, "bar"},
                                               {ProgressMode::kLines, "lines"}};

}  // namespace

ProgressMode parse_progress_mode(const std::string& name) {
  return find_named(kProgressModes, name, "progress mode").mode;
}

std::string progress_mode_name(ProgressMode mode) {
  for (const ProgressModeName& m : kProgressModes)
    if (m.mode == mode) return m.name;
  return "off";
}

Progress::Progress(size_t total, std::string label, ProgressMode mode, std::FILE* stream,
                   double line_every_percent)
    : total_(total),
      label_(std::move(label)),
      mode_(mode),
      stream_(stream),
      line_every_percent_(line_every_percent),
      next_line_percent_(line_every_percent) {
  if (!(line_every_percent > 0 && line_every_percent <= 100))
    throw InvalidArgument("progress: line_every_percent must be in (0, 100], got " +
                          std::to_string(line_every_percent));
  if (mode_ == ProgressMode::kAuto)
    mode_ = (stream_ != nullptr && isatty(fileno(stream_))) ? ProgressMode::kBar : ProgressMode::kLines;
  if (stream_ == nullptr) mode_ = ProgressMode::kOff;
}

Progress::~Progress() { finish(); }

std::string Progress::line() const {
  const double sec = clock_.ms() / 1000.0;
  const double rate = sec > 0 ? done_ / sec : 0.0;
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(done_) / total_) : 1.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  const double eta = rate > 0 ? (total_ - std::min(done_, total_)) / rate : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %zu/%zu %3.0f%% [%s] %.1f it/s elapsed %s ETA %s", label_.c_str(), done_,
                total_, 100.0 * frac, bar.c_str(), rate, format_seconds(sec).c_str(),
                done_ >= total_ ? "0s" : format_seconds(eta).c_str());
  return buf;
}

void Progress::advance(size_t n) {
  done_ += n;
  draw(false);
}

void Progress::draw(bool final_draw) {
  if (mode_ == ProgressMode::kOff || total_ == 0) return;
  if (mode_ == ProgressMode::kBar) {
    const double now = clock_.ms();
    if (!final_draw && now - last_draw_ms_ < 100.0) return;
    last_draw_ms_ = now;
    std::fprintf(stream_, "\r%s\033[K%s", line().c_str(), final_draw ? "\n" : "");
  } else {
    const double pct = 100.0 * static_cast<double>(done_) / total_;
    if (!final_draw) {
      if (pct < next_line_percent_ || done_ >= total_) return;  // the final line is drawn by finish()
      while (next_line_percent_ <= pct) next_line_percent_ += line_every_percent_;
    }
    std::fprintf(stream_, "%s\n", line().c_str());
  }
  std::fflush(stream_);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

}  // namespace vispco::eval
