// A progress report for long runs on a terminal stream: a redrawn bar with count, rate and ETA when the
// stream is a TTY, else one plain line every few percent (so logs of batch jobs stay readable).
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

#include "cost/timer.h"

namespace vispco::eval {

/// How progress is shown.
enum class ProgressMode {
  kOff,    ///< nothing
  kAuto,   ///< kBar when the stream is a terminal (isatty), else kLines
  kBar,    ///< one line redrawn in place ("\r"), at most ~10 times a second
  kLines,  ///< a new line each time another `line_every_percent` of the total is done
};

/// Parses "off" | "auto" | "bar" | "lines". @throws InvalidArgument listing the valid names.
ProgressMode parse_progress_mode(const std::string& name);
/// The name parse_progress_mode() reads.
std::string progress_mode_name(ProgressMode mode);

/// Counts finished items out of `total` and reports rate (items/s since start) and ETA (remaining / rate).
/// Not thread-safe. Writes only to the stream given; finish() ends the bar with a newline.
class Progress {
 public:
  /// @param total items expected (0 allowed: nothing is drawn) @param label printed first ("eval")
  /// @param line_every_percent kLines step in (0, 100].
  Progress(size_t total, std::string label, ProgressMode mode, std::FILE* stream = stderr,
           double line_every_percent = 10.0);
  /// Adds `n` finished items and redraws when due.
  void advance(size_t n = 1);
  /// Final report (always drawn unless kOff or total == 0). Called by the destructor if not before.
  void finish();
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  size_t done() const { return done_; }
  /// The text of the current report, e.g. "eval  12/40  30% [#####.....]  8.1 it/s  ETA 3s".
  std::string line() const;

 private:
  void draw(bool final_draw);

  size_t total_, done_ = 0;
  std::string label_;
  ProgressMode mode_;
  std::FILE* stream_;
  double line_every_percent_;
  double next_line_percent_;
  double last_draw_ms_ = -1e9;
  bool finished_ = false;
  Stopwatch clock_;
};

}  // namespace vispco::eval
