// Plots of an optimize report, drawn by gnuplot run as an external program (Debian package gnuplot-nox):
// accuracy vs FLOPs ratio with the Pareto frontier and the chosen plan; accuracy vs K per question family,
// one plot per template (accuracy points with 95 % Wilson error bars, the chosen plan's test point beside its
// calibration point); measured prefill time vs K with the FLOPs-model prediction. Each plot is a
// self-contained gnuplot script (data inline) next to its PNG, so it can be re-drawn or edited by hand.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "optimize/optimize.h"

namespace vispco::optimize {

/// Checks that `program` runs (`program --version`) and returns its version line.
/// @throws IoError "gnuplot not found …" with the install hint (apt-get install gnuplot-nox, or
///         scripts/install-deps.sh) and the way out (--no-plots).
std::string check_gnuplot(const std::string& program = "gnuplot");

/// The plot scripts of a report, (name, gnuplot script) in drawing order: accuracy_vs_flops,
/// accuracy_vs_k_<template> per template, prefill_vs_k. Accuracy rows are `x accuracy lower upper`, the
/// bounds the 95 % Wilson interval (eval/interval.h) on the point's n samples (per family: the family's n);
/// the chosen plan's test point (and unpruned on test) sit beside the calibration points (x + 0.015 in
/// accuracy_vs_flops, K × 1.08 in the chosen template's accuracy_vs_k). Pure: gnuplot is not run.
std::vector<std::pair<std::string, std::string>> plot_scripts(const OptimizeReport& report);

/// Writes the plot scripts under `dir`/plots/ and runs `program` on each, making PNGs (pngcairo terminal).
/// @return the PNG paths relative to `dir`, in the order made.
/// @throws IoError when a file cannot be written or gnuplot fails (its first error line quoted).
std::vector<std::string> write_plots(const OptimizeReport& report, const std::string& dir,
                                     const std::string& program = "gnuplot");

/// Building blocks of plot scripts, shared by other reports (dynamic K): a pngcairo header with title and
/// axis labels; an inline data block `$name` of (x, y) rows; a gnuplot string literal.
std::string gnuplot_header(const std::string& png, const std::string& title, const std::string& xlabel,
                           const std::string& ylabel);
std::string gnuplot_block(const std::string& name, const std::vector<std::pair<double, double>>& xy);
std::string gnuplot_quoted(const std::string& s);

/// Runs `program` on the gnuplot script at path `script` inside the script's folder (its output names resolve
/// there), without a shell. @throws IoError with gnuplot's first error lines and the install hint.
void run_gnuplot_script(const std::string& script, const std::string& program = "gnuplot");

/// Writes each (name, script) as `dir`/plots/name.gp and runs `program` on it inside plots/ (the script
/// writes name.png). @return "plots/name.png" per script. @throws IoError (file, or gnuplot's first error
/// lines).
std::vector<std::string> render_gnuplot(const std::vector<std::pair<std::string, std::string>>& scripts,
                                        const std::string& dir, const std::string& program = "gnuplot");

}  // namespace vispco::optimize
