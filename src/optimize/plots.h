// Plots of an optimize report, drawn by gnuplot run as an external program (Debian package gnuplot-nox):
// accuracy vs FLOPs ratio with the Pareto frontier and the chosen plan; accuracy vs K per question family, one
// plot per template; measured prefill time vs K with the FLOPs-model prediction. Each plot is a
// self-contained gnuplot script (data inline) next to its PNG, so it can be re-drawn or edited by hand.
#pragma once
#include <string>
#include <vector>

#include "optimize/optimize.h"

namespace vispco::optimize {

/// Checks that `program` runs (`program --version`) and returns its version line.
/// @throws IoError "gnuplot not found …" with the install hint (apt-get install gnuplot-nox, or
///         scripts/install-deps.sh) and the way out (--no-plots).
std::string check_gnuplot(const std::string& program = "gnuplot");

/// Writes the plot scripts under `dir`/plots/ and runs `program` on each, making PNGs (pngcairo terminal).
/// @return the PNG paths relative to `dir`, in the order made.
/// @throws IoError when a file cannot be written or gnuplot fails (its first error line quoted).
std::vector<std::string> write_plots(const OptimizeReport& report, const std::string& dir,
                                     const std::string& program = "gnuplot");

}  // namespace vispco::optimize
