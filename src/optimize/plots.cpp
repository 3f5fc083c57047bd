// gnuplot scripts for the optimize report, run with posix_spawnp (no shell, no quoting issues); see plots.h.
#include "optimize/plots.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "eval/interval.h"
#include "optimize/plan_template.h"

extern char** environ;

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;

const char* const kInstallHint =
    "install it (apt-get install gnuplot-nox, or bash scripts/install-deps.sh) or pass --no-plots";

// Runs `program args…` in folder `cwd` ("" = ours) with stdout and stderr sent to `log_path` (absolute).
// @return the exit status, or −1 (errno set) when the program cannot be started.
int run_program(const std::string& program, const std::vector<std::string>& args, const std::string& log_path,
                const std::string& cwd = "") {
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());  // glibc ≥ 2.29
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 127) errno = ENOENT;  // the child could not exec the program
    return code;
  }
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string first_lines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::string line, out;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out += (out.empty() ? "" : " / ") + line;
  return out;
}

std::string slug(const std::string& s) {
  std::string out;
  for (const char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// A gnuplot string literal in single quotes ('' escapes a quote).
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string header(const std::string& png, const std::string& title, const std::string& xlabel,
                   const std::string& ylabel) {
  return "set terminal pngcairo size 1000,640 noenhanced font ',10'\nset output " + quoted(png) +
         "\nset title " + quoted(title) + "\nset xlabel " + quoted(xlabel) + "\nset ylabel " +
         quoted(ylabel) + "\nset grid\nset key outside right top\n";
}

std::string block(const std::string& name, const std::vector<std::pair<double, double>>& xy) {
  std::ostringstream s;
  s.precision(8);
  s << "$" << name << " << EOD\n";
  for (const auto& [x, y] : xy) s << x << " " << y << "\n";
  s << "EOD\n";
  return s.str();
}

// An inline data block of rows of any width.
std::string block_rows(const std::string& name, const std::vector<std::vector<double>>& rows) {
  std::ostringstream s;
  s.precision(8);
  s << "$" << name << " << EOD\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) s << (i ? " " : "") << r[i];
    s << "\n";
  }
  s << "EOD\n";
  return s.str();
}

// (x, accuracy, lower, upper): the accuracy with its 95 % Wilson interval on n samples (eval/interval.h).
std::vector<double> with_wilson(double x, double accuracy, size_t n) {
  const eval::Interval i = eval::wilson_interval(std::clamp(accuracy, 0.0, 1.0), n);
  return {x, accuracy, i.lower, i.upper};
}

// Templates in first-seen order, each with its points sorted by K.
std::vector<std::pair<std::string, std::vector<const EvalPoint*>>> by_template(
    const std::vector<EvalPoint>& pts) {
  std::vector<std::pair<std::string, std::vector<const EvalPoint*>>> out;
  for (const auto& p : pts) {
    if (p.template_text == "none" || p.template_text.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == p.template_text; });
    if (it == out.end()) {
      out.emplace_back(p.template_text, std::vector<const EvalPoint*>{});
      it = out.end() - 1;
    }
    it->second.push_back(&p);
  }
  for (auto& [t, v] : out)
    std::stable_sort(v.begin(), v.end(),
                     [](const EvalPoint* a, const EvalPoint* b) { return a->param < b->param; });
  return out;
}

std::string accuracy_vs_flops(const OptimizeReport& r, const std::string& png) {
  const auto& s = r.search;
  std::string gp =
      header(png,
             "accuracy vs LLM FLOPs ratio (" + r.options.method +
                 ", calibration split; error bars: 95 % Wilson intervals)",
             "LLM prefill FLOPs ratio (plan / unpruned)", "accuracy (calibration; test points marked)");
  double top = 0;
  for (const auto& p : s.points) top = std::max(top, p.accuracy);
  gp += "set xrange [0:1.08]\nset yrange [0:" + std::to_string(std::min(1.05, std::max(0.1, top * 1.15))) +
        "]\n";
  std::string plot = "plot ";
  int i = 0;
  for (const auto& [t, pts] : by_template(s.points)) {
    std::vector<std::vector<double>> rows;
    for (const auto* p : pts) rows.push_back(with_wilson(p->flops.llm, p->accuracy, p->n));
    gp += block_rows("t" + std::to_string(i), rows);
    plot += "$t" + std::to_string(i) + " using 1:2:3:4 with yerrorbars pt 7 ps 1.2 title " + quoted(t) + ", ";
    ++i;
  }
  std::vector<std::pair<double, double>> front;
  for (const size_t k : s.frontier) front.emplace_back(s.points[k].flops.llm, s.points[k].accuracy);
  gp += block("frontier", front);
  plot +=
      "$frontier using 1:2 with lines lw 2 dt 2 lc rgb 'black' title 'Pareto frontier (point estimates)', ";
  if (!s.points.empty()) {
    gp += block_rows("ref", {with_wilson(s.points[0].flops.llm, s.points[0].accuracy, s.points[0].n)});
    plot += "$ref using 1:2:3:4 with yerrorbars pt 5 ps 1.5 lc rgb 'gray30' title 'unpruned (calibration)', ";
  }
  if (s.chosen) {
    const EvalPoint& c = s.points[*s.chosen];
    gp += block_rows("chosen", {with_wilson(c.flops.llm, c.accuracy, c.n)});
    plot += "$chosen using 1:2:3:4 with yerrorbars pt 3 ps 3 lw 2 lc rgb 'red' title " +
            quoted("chosen (calibration): " + c.plan) + ", ";
  }
  if (r.test) {  // beside the calibration points: shifted right by 0.015 so the bars do not overlap
    const EvalPoint &tc = r.test->chosen, &tr = r.test->reference;
    gp += block_rows("test_chosen", {with_wilson(tc.flops.llm + 0.015, tc.accuracy, tc.n)});
    gp += block_rows("test_ref", {with_wilson(tr.flops.llm + 0.015, tr.accuracy, tr.n)});
    plot += "$test_chosen using 1:2:3:4 with yerrorbars pt 9 ps 2.5 lw 2 lc rgb 'dark-orange' title " +
            quoted("chosen on test (x + 0.015)") + ", ";
    plot +=
        "$test_ref using 1:2:3:4 with yerrorbars pt 4 ps 1.5 lc rgb 'gray50' title 'unpruned on test (x + "
        "0.015)', ";
  }
  return gp + plot.substr(0, plot.size() - 2) + "\n";
}

// The x of a template's parameter: K, or a keep ratio in % (the parameter is in ‰).
double param_x(const std::string& tmpl, int64_t param) {
  return is_keep_ratio_template(tmpl) ? static_cast<double>(param) / 10.0 : static_cast<double>(param);
}

std::string accuracy_vs_k(const OptimizeReport& r, const std::string& tmpl,
                          const std::vector<const EvalPoint*>& pts, const std::string& png) {
  const bool ratio = is_keep_ratio_template(tmpl);
  std::string gp =
      header(png,
             std::string(ratio ? "accuracy vs keep ratio" : "accuracy vs K") + " per family: " + tmpl +
                 " (calibration split; 95 % Wilson intervals)",
             ratio ? "keep ratio, % of each image's own N_v" : "kept visual tokens K", "accuracy");
  gp += "set logscale x 2\nset yrange [0:1.05]\n";
  std::set<std::string> families;
  for (const auto* p : pts)
    for (const auto& [f, v] : p->per_family) families.insert(f);
  std::string plot = "plot ";
  int i = 0;
  for (const auto& f : families) {
    std::vector<std::vector<double>> rows;
    for (const auto* p : pts)
      if (auto it = p->per_family.find(f); it != p->per_family.end())
        rows.push_back(with_wilson(param_x(tmpl, p->param), it->second.accuracy, it->second.n));
    gp += block_rows("f" + std::to_string(i), rows);
    plot += "$f" + std::to_string(i) + " using 1:2:3:4 with yerrorlines lw 1 title " + quoted(f) + ", ";
    ++i;
  }
  std::vector<std::vector<double>> all;
  for (const auto* p : pts) all.push_back(with_wilson(param_x(tmpl, p->param), p->accuracy, p->n));
  gp += block_rows("all", all);
  plot += "$all using 1:2:3:4 with yerrorlines lw 3 lc rgb 'black' title 'all families', ";
  if (r.search.chosen && r.test && r.search.points[*r.search.chosen].template_text == tmpl) {
    const EvalPoint& c = r.search.points[*r.search.chosen];
    const EvalPoint& tc = r.test->chosen;
    gp += block_rows("chosen", {with_wilson(param_x(tmpl, c.param), c.accuracy, c.n)});
    gp += block_rows("test_chosen", {with_wilson(param_x(tmpl, c.param) * 1.08, tc.accuracy, tc.n)});
    plot += "$chosen using 1:2:3:4 with yerrorbars pt 3 ps 3 lw 2 lc rgb 'red' title " +
            quoted("chosen (calibration): " +
                   (ratio ? "keep " + std::to_string(c.param / 10) + "." + std::to_string(c.param % 10) + "%"
                          : "K=" + std::to_string(c.param))) +
            ", ";
    plot += "$test_chosen using 1:2:3:4 with yerrorbars pt 9 ps 2.5 lw 2 lc rgb 'dark-orange' title " +
            quoted("chosen on test (x 1.08)") + ", ";
  }
  if (!r.search.points.empty() && r.search.points[0].plan == "none") {
    gp += "set arrow from graph 0, first " + std::to_string(r.search.points[0].accuracy) +
          " to graph 1, first " + std::to_string(r.search.points[0].accuracy) +
          " nohead dt 3 lc rgb 'gray30'\n";
  }
  return gp + plot.substr(0, plot.size() - 2) + "\n";
}

std::string prefill_vs_k(const OptimizeReport& r, const std::string& png) {
  const auto& s = r.search;
  const double ref_ms = s.points.empty() ? 0.0 : s.points[0].mean_prefill_ms;
  // Keep-ratio templates on the same axis in % of N_v (the unpruned point at 100 %) when they are all there
  // is.
  bool all_ratio = !s.points.empty();
  for (const auto& [t, pts] : by_template(s.points)) all_ratio = all_ratio && is_keep_ratio_template(t);
  std::string gp =
      header(png,
             std::string("measured prefill vs ") + (all_ratio ? "keep ratio" : "K") +
                 ", and the FLOPs model (unpruned time x FLOPs ratio)",
             all_ratio ? "keep ratio, % of each image's own N_v (FLOPs model: at the nominal N_v)"
                       : "kept visual tokens K (keep-ratio templates: % of N_v)",
             "decoder prefill per sample, ms (calibration split)");
  gp += "set logscale x 2\nset yrange [0:*]\n";
  std::string plot = "plot ";
  int i = 0;
  for (const auto& [t, pts] : by_template(s.points)) {
    std::vector<std::pair<double, double>> xy;
    for (const auto* p : pts) xy.emplace_back(param_x(t, p->param), p->mean_prefill_ms);
    gp += block("m" + std::to_string(i), xy);
    plot += "$m" + std::to_string(i) + " using 1:2 with linespoints lw 2 pt 7 lc " + std::to_string(i + 1) +
            " title " + quoted(t + " measured") + ", ";
    for (const auto& c : r.flops_curves)
      if (c.template_text == t) {
        std::vector<std::pair<double, double>> model;
        for (const auto& [k, ratio] : c.points) model.emplace_back(param_x(t, k), ref_ms * ratio);
        gp += block("c" + std::to_string(i), model);
        plot += "$c" + std::to_string(i) + " using 1:2 with lines dt 2 lc " + std::to_string(i + 1) +
                " title " + quoted(t + " FLOPs model") + ", ";
      }
    ++i;
  }
  if (!s.points.empty()) {
    gp += block("ref", {{all_ratio ? 100.0 : static_cast<double>(r.n_visual), ref_ms}});
    plot += "$ref using 1:2 with points pt 5 ps 1.5 lc rgb 'gray30' title 'unpruned', ";
  }
  return gp + plot.substr(0, plot.size() - 2) + "\n";
}

}  // namespace

std::string check_gnuplot(const std::string& program) {
  const fs::path log =
      fs::temp_directory_path() / ("vispco_gnuplot_check_" + std::to_string(::getpid()) + ".txt");
  const int rc = run_program(program, {"--version"}, log.string());
  const int err = errno;
  const std::string version = first_lines(log.string(), 1);
  std::error_code ec;
  fs::remove(log, ec);
  if (rc == -1 || rc == 127)
    throw IoError("gnuplot not found ('" + program + "': " + std::strerror(rc == -1 ? err : ENOENT) +
                  "): " + kInstallHint);
  if (rc != 0)
    throw IoError("gnuplot ('" + program + "') does not run (exit " + std::to_string(rc) +
                  "): " + kInstallHint);
  return version;
}

std::string gnuplot_header(const std::string& png, const std::string& title, const std::string& xlabel,
                           const std::string& ylabel) {
  return header(png, title, xlabel, ylabel);
}

std::string gnuplot_block(const std::string& name, const std::vector<std::pair<double, double>>& xy) {
  return block(name, xy);
}

std::string gnuplot_quoted(const std::string& s) { return quoted(s); }

void run_gnuplot_script(const std::string& script, const std::string& program) {
  // gnuplot resolves the output name against its working directory: run it inside the script's folder.
  const fs::path path = fs::absolute(script);
  const std::string log = (path.parent_path() / (path.stem().string() + ".log")).string();
  const int rc = run_program(program, {path.filename().string()}, log, path.parent_path().string());
  if (rc == -1 || rc == 127) throw IoError("gnuplot not found ('" + program + "'): " + kInstallHint);
  if (rc != 0)
    throw IoError("gnuplot failed on '" + script + "' (exit " + std::to_string(rc) +
                  "): " + first_lines(log, 3));
  std::error_code ec;
  fs::remove(log, ec);
}

std::vector<std::string> render_gnuplot(const std::vector<std::pair<std::string, std::string>>& scripts,
                                        const std::string& dir, const std::string& program) {
  const fs::path plots = fs::path(dir) / "plots";
  std::error_code ec;
  fs::create_directories(plots, ec);
  if (ec) throw IoError("plots: cannot create '" + plots.string() + "': " + ec.message());
  std::vector<std::string> made;
  for (const auto& [name, gp] : scripts) {
    const fs::path script = plots / (name + ".gp");
    {
      std::ofstream out(script, std::ios::binary | std::ios::trunc);
      if (!out) throw IoError("plots: cannot write '" + script.string() + "'");
      out << gp;
    }
    run_gnuplot_script(script.string(), program);
    made.push_back("plots/" + name + ".png");
  }
  return made;
}

std::vector<std::pair<std::string, std::string>> plot_scripts(const OptimizeReport& report) {
  std::vector<std::pair<std::string, std::string>> scripts;  // (name without extension, script)
  scripts.emplace_back("accuracy_vs_flops", accuracy_vs_flops(report, "accuracy_vs_flops.png"));
  for (const auto& [t, pts] : by_template(report.search.points)) {
    const std::string name = "accuracy_vs_k_" + slug(t);
    scripts.emplace_back(name, accuracy_vs_k(report, t, pts, name + ".png"));
  }
  scripts.emplace_back("prefill_vs_k", prefill_vs_k(report, "prefill_vs_k.png"));
  return scripts;
}

std::vector<std::string> write_plots(const OptimizeReport& report, const std::string& dir,
                                     const std::string& program) {
  return render_gnuplot(plot_scripts(report), dir, program);
}

}  // namespace vispco::optimize
