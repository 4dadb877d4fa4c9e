#include "rtl/waves_fst.hpp"

#include <gtkwave/fstapi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/waves.hpp"

namespace tessera::rtl {

namespace {

bool write_fst(const std::string& file, const waves::Dump& d) {
  void* ctx = fstWriterCreate(file.c_str(), 1);
  if (!ctx) return false;
  fstWriterSetTimescale(ctx, static_cast<int>(std::lround(std::log10(d.resolution))));
  fstWriterSetVersion(ctx, "tessera-vp model-level waves");
  // Scopes from the instance paths, in path order; handles by signal.
  std::vector<std::size_t> order(d.signals.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return d.signals[a].path < d.signals[b].path; });
  std::vector<fstHandle> handle(d.signals.size());
  std::vector<std::string> open;
  for (std::size_t i : order) {
    const auto& s = d.signals[i];
    const std::vector<std::string> parts = waves::scopes(s.path);
    std::size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) ++common;
    while (open.size() > common) fstWriterSetUpscope(ctx), open.pop_back();
    for (std::size_t k = common; k < parts.size(); ++k)
      fstWriterSetScope(ctx, FST_ST_VCD_MODULE, parts[k].c_str(), nullptr), open.push_back(parts[k]);
    handle[i] = fstWriterCreateVar(ctx, s.width ? FST_VT_VCD_WIRE : FST_VT_VCD_REAL, FST_VD_IMPLICIT, s.width ? s.width : 64,
                                   s.name.c_str(), 0);
  }
  while (!open.empty()) fstWriterSetUpscope(ctx), open.pop_back();
  std::string bits;
  auto emit = [&](std::size_t i, std::uint64_t v, double r) {
    const auto& s = d.signals[i];
    if (s.width == 0) {
      fstWriterEmitValueChange(ctx, handle[i], &r);
      return;
    }
    bits.assign(s.width, '0');
    for (unsigned b = 0; b < s.width; ++b)
      if (v >> b & 1) bits[s.width - 1 - b] = '1';
    fstWriterEmitValueChange(ctx, handle[i], bits.c_str());
  };
  fstWriterEmitTimeChange(ctx, d.from);
  for (std::size_t i = 0; i < d.signals.size(); ++i) emit(i, d.signals[i].initial, d.signals[i].initial_real);
  std::uint64_t last = d.from;
  for (const auto& c : d.changes) {
    if (c.at != last) fstWriterEmitTimeChange(ctx, c.at), last = c.at;
    emit(static_cast<std::size_t>(c.id), c.bits, c.real);
  }
  fstWriterClose(ctx);
  return true;
}

}  // namespace

void install_waves_fst() { waves::set_fst_writer(&write_fst); }

}  // namespace tessera::rtl
