// Prometheus text-format metrics (see metrics.h).
#include "serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/errors.h"

namespace vispco::serve {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);  // shortest form that reads back as v
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

double Histogram::quantile(double q) const {
  if (count == 0) return NAN;
  const double rank = q * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (static_cast<double>(below + counts[i]) >= rank) {
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      return lo + (bounds[i] - lo) * (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
    }
    below += counts[i];
  }
  return bounds.empty() ? NAN : bounds.back();  // in the +Inf bucket: its lower bound, as Prometheus does
}

std::string render_labels(const std::map<std::string, std::string>& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (const auto& [k, v] : labels) {
    if (s.size() > 1) s += ",";
    s += k + "=\"";
    for (char c : v) {
      if (c == '\\' || c == '"') s += '\\';
      if (c == '\n') {
        s += "\\n";
        continue;
      }
      s += c;
    }
    s += "\"";
  }
  return s + "}";
}

void Metrics::declare(const std::string& name, const std::string& type, const std::string& help,
                      std::vector<double> bounds) {
  if (type != "counter" && type != "gauge" && type != "histogram")
    throw InvalidArgument("metric " + name + ": unknown type '" + type +
                          "' (valid: counter, gauge, histogram)");
  if (!std::is_sorted(bounds.begin(), bounds.end()))
    throw InvalidArgument("metric " + name + ": histogram bounds must ascend");
  std::lock_guard<std::mutex> lock(mu_);
  if (families_.count(name) == 0) order_.push_back(name);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.hist.bounds = std::move(bounds);
  f.hist.counts.assign(f.hist.bounds.size(), 0);
}

const Metrics::Family& Metrics::family(const std::string& name) const {
  const auto it = families_.find(name);
  if (it == families_.end()) throw InvalidArgument("undeclared metric '" + name + "'");
  return it->second;
}

Metrics::Family& Metrics::family(const std::string& name) {
  return const_cast<Family&>(static_cast<const Metrics*>(this)->family(name));
}

void Metrics::add(const std::string& name, double v, const std::map<std::string, std::string>& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name).samples[render_labels(labels)] += v;
}

void Metrics::set(const std::string& name, double v, const std::map<std::string, std::string>& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name).samples[render_labels(labels)] = v;
}

void Metrics::observe(const std::string& name, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& h = family(name).hist;
  const auto it = std::lower_bound(h.bounds.begin(), h.bounds.end(), v);
  if (it != h.bounds.end()) ++h.counts[static_cast<size_t>(it - h.bounds.begin())];
  ++h.count;
  h.sum += v;
}

double Metrics::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& s = family(name).samples;
  const auto it = s.find(render_labels(labels));
  return it == s.end() ? 0.0 : it->second;
}

Histogram Metrics::histogram(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& f = family(name);
  if (f.type != "histogram")
    throw InvalidArgument("metric '" + name + "' is a " + f.type + ", not a histogram");
  return f.hist;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& name : order_) {
    const auto& f = families_.at(name);
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    if (f.type == "histogram") {
      uint64_t cum = 0;
      for (size_t i = 0; i < f.hist.bounds.size(); ++i) {
        cum += f.hist.counts[i];
        out += name + "_bucket{le=\"" + number(f.hist.bounds[i]) + "\"} " + std::to_string(cum) + "\n";
      }
      out += name + "_bucket{le=\"+Inf\"} " + std::to_string(f.hist.count) + "\n";
      out +=
          name + "_sum " + number(f.hist.sum) + "\n" + name + "_count " + std::to_string(f.hist.count) + "\n";
    } else if (f.samples.empty()) {
      out += name + " 0\n";
    } else {
      for (const auto& [labels, v] : f.samples) out += name + labels + " " + number(v) + "\n";
    }
  }
  return out;
}

}  // namespace vispco::serve
