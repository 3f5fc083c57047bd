// VisPCO search outputs: JSON, CSV, Markdown and a gnuplot script.
#include "optimize/learned/report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "core/json_file.h"
#include "core/text_file.h"
#include "optimize/plots.h"

namespace vispco::optimize::learned {

namespace fs = std::filesystem;

namespace {
std::string fmt(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

nlohmann::json SearchReport::to_json() const {
  auto pts = nlohmann::json::array();
  for (const auto& p : points) pts.push_back(p.to_json());
  return {{"method", "vispco"},
          {"label", label},
          {"model", model},
          {"data", data},
          {"world_size", world_size},
          {"options", optimize::learned::to_json(options)},
          {"training", training.to_json()},
          {"eval_seconds", eval_seconds},
          {"points", pts},
          {"grid", grid.empty()
                       ? nlohmann::json(nullptr)
                       : nlohmann::json{{"source", grid.source},
                                        {"split", grid.split},
                                        {"wall_s", std::isnan(grid.wall_s) ? nlohmann::json(nullptr)
                                                                           : nlohmann::json(grid.wall_s)},
                                        {"points", grid.points}}}};
}

std::string curve_csv(const SearchReport& r) {
  std::string s =
      "method,kernel,budget,flops_ratio,accuracy,achieved_budget,flops_error,raw_flops_error,n,n_plans\n";
  auto pts = r.points;
  std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.budget < b.budget; });
  for (const auto& p : pts)
    s += "vispco," + kernel_name(r.options.kernel.kind) + "," + fmt(p.budget) + "," + fmt(p.flops_ratio, 6) +
         "," + fmt(p.accuracy, 6) + "," + fmt(p.achieved_budget, 6) + "," + fmt(p.flops_error, 6) + "," +
         fmt(p.raw_flops_error, 6) + "," + std::to_string(p.n) + "," + std::to_string(p.n_plans) + "\n";
  return s;
}

std::string SearchReport::to_markdown() const {
  std::ostringstream md;
  md << "# VisPCO search\n\n";
  if (!label.empty()) md << "**" << label << "**\n\n";
  md << "- model: `" << model << "`, evaluation data: `" << data << "`\n";
  md << "- scorer " << options.scorer << ", kernel " << kernel_name(options.kernel.kind);
  if (options.kernel.kind == KernelKind::kMultiStep) md << " (S = " << options.kernel.n_stages << ")";
  md << ", first pruned layer " << search_first_layer(options) << ", budget floor "
     << budget_floor_name(options.floor) << ", " << world_size << " process(es)\n";
  md << "- training: " << training.epochs.size() << " epochs, "
     << (training.converged ? "converged" : "not converged") << " (stopping rule mean|c| < "
     << options.al.epsilon << " for " << options.al.patience << " epochs); teacher cache "
     << fmt(training.teacher_seconds, 1) << " s, training " << fmt(training.train_seconds, 1) << " s\n";
  if (!training.epochs.empty()) {
    const auto& e = training.epochs.back();
    md << "- last epoch: train KL " << fmt(e.train_kl, 5) << ", validation mean|c| " << fmt(e.val_abs_c, 5)
       << ", μ " << e.mu << "\n";
    md << "- predictor kept: epoch " << training.selected_epoch << " (validation mean|c| "
       << fmt(training.selected_val_abs_c, 5)
       << (options.restore_best ? ", lowest of all epochs" : ", the last") << ")\n";
  }
  md << "- evaluation: " << fmt(eval_seconds, 1) << " s for " << points.size() << " budgets\n";
  if (!grid.empty()) {
    md << "- grid frontier: `" << grid.source << "`, " << grid.points.size() << " points"
       << (grid.split.empty() ? "" : " on the " + grid.split + " split") << "\n";
    const double pco_s = training.teacher_seconds + training.train_seconds + eval_seconds;
    if (!std::isnan(grid.wall_s) && !training.epochs.empty())  // not with a loaded predictor (no training)
      md << "- search wall time: VisPCO " << fmt(pco_s, 1)
         << " s (teacher + training + evaluation of every budget), "
         << "grid " << fmt(grid.wall_s, 1) << " s: the grid took " << fmt(grid.wall_s / pco_s, 2)
         << "× VisPCO's\n";
  }
  md << "\n";
  if (points.empty()) return md.str();
  const bool projected = points.front().projected;
  md << (projected ? "Plans projected onto each budget (R → R^α, optimize/learned/budget_projection.h); "
                     "\"predictor "
                     "alone\" is "
                     "the FLOPs error of the predicted plans before the projection.\n\n"
                   : "Plans as predicted (no budget projection).\n\n");
  md << "| budget | FLOPs ratio (LLM) | achieved budget | FLOPs vs target | predictor alone | accuracy | n | "
        "plans | "
        "most frequent plan |\n"
     << "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& p : points)
    md << "| " << fmt(p.budget, 2) << " | " << fmt(p.flops_ratio) << " | " << fmt(p.achieved_budget) << " | "
       << fmt(100 * p.flops_error, 2) << "% | " << fmt(100 * p.raw_flops_error, 2) << "% | "
       << fmt(100 * p.accuracy, 2) << "% | " << p.n << " | " << p.n_plans << " | `" << p.common_plan << "` ("
       << p.common_plan_count << ") |\n";
  md << "\nAccuracy per family (%):\n\n| family |";
  for (const auto& p : points) md << " b=" << fmt(p.budget, 2) << " |";
  md << "\n|---|";
  for (size_t i = 0; i < points.size(); ++i) md << "---:|";
  md << "\n";
  for (const auto& [fam, tot] : points.front().metrics.per_family) {
    md << "| " << fam << " |";
    for (const auto& p : points) {
      auto it = p.metrics.per_family.find(fam);
      md << " " << (it == p.metrics.per_family.end() ? "-" : fmt(100 * it->second.accuracy(), 1)) << " |";
    }
    md << "\n";
  }
  md << "\nMean visual tokens entering each layer:\n\n| budget | K per layer |\n|---:|---|\n";
  for (const auto& p : points) {
    md << "| " << fmt(p.budget, 2) << " |";
    for (double k : p.mean_keep) md << " " << fmt(k, 1);
    md << " |\n";
  }
  return md.str();
}

namespace {
std::vector<std::pair<double, double>> read_frontier_csv(std::istream& in, const std::string& path) {
  std::vector<std::pair<double, double>> out;
  std::string line;
  size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<double> nums;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',') && nums.size() < 2) {
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (end != cell.c_str() && end != nullptr) nums.push_back(v);
    }
    if (nums.size() < 2) {
      if (no == 1) continue;  // header
      throw FormatError(path + ":" + std::to_string(no) + ": expected 'flops_ratio,accuracy', got '" + line +
                        "'");
    }
    out.emplace_back(nums[0], nums[1]);
  }
  if (out.empty()) throw FormatError(path + ": no frontier points");
  return out;
}

// The frontier of an optimize.json (OptimizeReport::to_json): calibration.points at calibration.frontier,
// wall_s.
GridFrontier read_frontier_optimize_json(std::istream& in, const std::string& path) {
  nlohmann::json j;
  try {
    j = parse_json(in, path);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path + ": not valid JSON (" + e.what() + ")");
  }
  auto bad = [&](const std::string& what) {
    return FormatError(path + ": " + what +
                       " (expected the optimize.json of `vispco optimize --method grid`)");
  };
  if (!j.is_object() || !j.contains("calibration") || !j["calibration"].is_object())
    throw bad("no 'calibration'");
  const auto& cal = j["calibration"];
  if (!cal.contains("points") || !cal["points"].is_array()) throw bad("no 'calibration.points' array");
  if (!cal.contains("frontier") || !cal["frontier"].is_array()) throw bad("no 'calibration.frontier' array");
  GridFrontier g;
  g.source = path;
  g.split = "calibration";
  if (j.contains("wall_s") && j["wall_s"].is_number()) g.wall_s = j["wall_s"].get<double>();
  for (const auto& idx : cal["frontier"]) {
    if (!idx.is_number_unsigned() || idx.get<size_t>() >= cal["points"].size())
      throw bad("calibration.frontier holds " + idx.dump() + ", not an index into calibration.points");
    const auto& p = cal["points"][idx.get<size_t>()];
    if (!p.contains("flops_ratio") || !p["flops_ratio"].is_number() || !p.contains("accuracy") ||
        !p["accuracy"].is_number())
      throw bad("calibration.points[" + idx.dump() + "] lacks a numeric flops_ratio or accuracy");
    g.points.emplace_back(p["flops_ratio"].get<double>(), p["accuracy"].get<double>());
  }
  if (g.points.empty()) throw FormatError(path + ": no frontier points");
  return g;
}
}  // namespace

GridFrontier read_grid_frontier(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read grid frontier '" + path + "'");
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  in.clear();
  in.seekg(0);
  if (first == '{') return read_frontier_optimize_json(in, path);
  GridFrontier g;
  g.source = path;
  g.points = read_frontier_csv(in, path);
  return g;
}

std::string curve_gnuplot(const SearchReport& r, const std::string& png_name) {
  const auto& frontier = r.grid.points;
  std::ostringstream gp;
  gp << "# VisPCO curve (accuracy vs LLM prefill FLOPs ratio); data inline. Re-draw: gnuplot curve.gp\n"
     << "set terminal pngcairo size 900,600\nset output '" << png_name << "'\n"
     << "set xlabel 'LLM prefill FLOPs ratio'\nset ylabel 'accuracy (%)'\nset grid\nset key bottom right\n"
     << "set title 'VisPCO (" << kernel_name(r.options.kernel.kind) << ", " << r.options.scorer << ")"
     << (r.label.empty() ? "" : " - " + r.label) << "'\n";
  gp << "$vispco << EOD\n";
  auto pts = r.points;
  std::sort(pts.begin(), pts.end(),
            [](const auto& a, const auto& b) { return a.flops_ratio < b.flops_ratio; });
  for (const auto& p : pts)
    gp << fmt(p.flops_ratio, 6) << " " << fmt(100 * p.accuracy, 4) << " " << fmt(p.budget, 2) << "\n";
  gp << "EOD\n";
  if (!frontier.empty()) {
    gp << "$grid << EOD\n";
    auto f = frontier;
    std::sort(f.begin(), f.end());
    for (const auto& [x, y] : f) gp << fmt(x, 6) << " " << fmt(y <= 1.0 ? 100 * y : y, 4) << "\n";
    gp << "EOD\n";
  }
  gp << "plot $vispco using 1:2 with linespoints lw 2 pt 7 title 'VisPCO', "
     << "$vispco using 1:2:(sprintf('b=%.2f', $3)) with labels offset 0,1 notitle";
  if (!frontier.empty())  // points too: a one-point frontier draws no step
    gp << ", $grid using 1:2 with steps lw 2 dt 2 lc rgb 'black' title 'grid frontier'"
       << ", $grid using 1:2 with points pt 6 ps 1.5 lc rgb 'black' notitle";
  gp << "\n";
  return gp.str();
}

std::string write_search_outputs(const SearchReport& r, const std::string& dir, const std::string& gnuplot) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  const fs::path d(dir);
  write_text_atomically((d / "curve.json").string(), r.to_json().dump(2) + "\n");
  write_text_atomically((d / "curve.csv").string(), curve_csv(r));
  write_text_atomically((d / "summary.md").string(), r.to_markdown());
  if (r.points.empty()) return "";
  write_text_atomically((d / "curve.gp").string(), curve_gnuplot(r, "curve.png"));
  if (gnuplot.empty()) return "";
  run_gnuplot_script((d / "curve.gp").string(), gnuplot);
  return (d / "curve.png").string();
}

}  // namespace vispco::optimize::learned
