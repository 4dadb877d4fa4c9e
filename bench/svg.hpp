// A small SVG line plot for the studies: series of (x, y) points, linear or
// logarithmic axes, a legend. No dependencies; good enough to open in a
// browser and to show in a README.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace tessera::bench {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

inline bool write_svg(const std::string& file, const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, const std::vector<Series>& series, bool logx, bool logy) {
  const double W = 720, H = 440, L = 80, R = 180, T = 40, B = 60;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  auto fx = [&](double x) { return logx ? std::log10(x) : x; };
  auto fy = [&](double y) { return logy ? std::log10(y) : y; };
  for (const Series& s : series)
    for (auto [x, y] : s.points) {
      if ((logx && x <= 0) || (logy && y <= 0)) continue;
      x0 = std::min(x0, fx(x)), x1 = std::max(x1, fx(x)), y0 = std::min(y0, fy(y)), y1 = std::max(y1, fy(y));
    }
  if (x0 > x1) return false;
  if (logx) x0 = std::floor(x0), x1 = std::ceil(x1);
  if (logy) y0 = std::floor(y0), y1 = std::ceil(y1);
  if (!logy) y0 = std::min(0.0, y0);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  auto px = [&](double x) { return L + (fx(x) - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (fy(y) - y0) / (y1 - y0) * (H - T - B); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                              "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
                              W, H);
  o += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n", L, title);
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, H - B, W - R);
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, H - B, T);
  // Ticks: decades on log axes, five steps on linear ones.
  auto ticks = [](double lo, double hi, bool log) {
    std::vector<double> t;
    if (log) {
      for (double e = lo; e <= hi + 1e-9; e += 1) t.push_back(std::pow(10.0, e));
    } else {
      for (int i = 0; i <= 5; ++i) t.push_back(lo + (hi - lo) * i / 5);
    }
    return t;
  };
  auto label = [](double v) { return fmt::format("{:g}", v); };
  for (double t : ticks(x0, x1, logx))
    o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0}\" y=\"{3}\" "
                     "text-anchor=\"middle\">{4}</text>\n",
                     px(t), H - B, T, H - B + 16, label(t));
  for (double t : ticks(y0, y1, logy))
    o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4}\" "
                     "text-anchor=\"end\">{5}</text>\n",
                     L, py(t), W - R, L - 6, py(t) + 4, label(t));
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 18, xlabel);
  o += fmt::format("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">{1}</text>\n",
                   (T + H - B) / 2, ylabel);
  static const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"};
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* c = colours[i % 8];
    std::string path;
    for (auto [x, y] : series[i].points) {
      if ((logx && x <= 0) || (logy && y <= 0)) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(x), py(y));
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y), c);
    }
    o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", path, c);
    o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/><text x=\"{4}\" "
                     "y=\"{5}\">{6}</text>\n",
                     W - R + 10, T + 14 + 18 * i, W - R + 34, c, W - R + 40, T + 18 + 18 * i, series[i].name);
  }
  o += "</svg>\n";
  std::ofstream out(file);
  out << o;
  return static_cast<bool>(out);
}

}  // namespace tessera::bench
