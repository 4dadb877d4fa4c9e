// Arithmetic of the tensor core's processing element, as the model does it
// (ip/engines/num/accumulate.hpp): an FP8 E4M3 x E4M3 product formed exactly
// in FP32, and an FP32 addition rounding to nearest even; INT8 x INT8 into
// a wrapping INT32 sum. Subnormal FP32 operands and results are handled;
// every NaN comes out as the quiet NaN 0x7fc00000 (NaN payloads are not
// architectural: the co-verification compares NaN with NaN).
package tessera_fp;

  localparam logic [31:0] QNAN = 32'h7fc0_0000;

  // E4M3 x E4M3, exact. An E4M3 value is S x 2^E with S = 8 + m (E = e - 10)
  // for e > 0 and S = m (E = -9) for e = 0; e = 15, m = 7 is NaN.
  function automatic logic [31:0] e4m3_mul(input logic [7:0] a, input logic [7:0] b);
    logic        sign, nan;
    logic [3:0]  sa, sb;
    logic [7:0]  p;
    logic signed [9:0] ea, eb;
    /* verilator lint_off UNUSEDSIGNAL */  // the biased exponent fits in 8 bits: 127 - 18 to 127 + 17
    logic signed [9:0] ex;
    /* verilator lint_on UNUSEDSIGNAL */
    logic [2:0]  lead;
    logic [22:0] frac;
    sign = a[7] ^ b[7];
    nan = (a[6:0] == 7'h7f) || (b[6:0] == 7'h7f);
    sa = (a[6:3] == 4'd0) ? {1'b0, a[2:0]} : {1'b1, a[2:0]};
    sb = (b[6:3] == 4'd0) ? {1'b0, b[2:0]} : {1'b1, b[2:0]};
    ea = (a[6:3] == 4'd0) ? -10'sd9 : $signed({6'd0, a[6:3]}) - 10'sd10;
    eb = (b[6:3] == 4'd0) ? -10'sd9 : $signed({6'd0, b[6:3]}) - 10'sd10;
    p = {4'd0, sa} * {4'd0, sb};
    lead = 3'd0;
    for (int i = 0; i < 8; i++)
      if (p[i]) lead = 3'(i);
    // p = 1.f x 2^lead: the bits below the leading one, at the top of the fraction.
    frac = 23'(({24'd0, p} << (5'd23 - {2'd0, lead})) & 32'h007f_ffff);
    ex = ea + eb + $signed({7'd0, lead}) + 10'sd127;
    if (nan) e4m3_mul = QNAN;
    else if (p == 8'd0) e4m3_mul = {sign, 31'd0};
    else e4m3_mul = {sign, ex[7:0], frac};
  endfunction

  // FP32 a + b, rounding to nearest, ties to even.
  function automatic logic [31:0] fp32_add(input logic [31:0] a, input logic [31:0] b);
    logic        sa, sb, sr, swap;
    logic [7:0]  fa, fb;
    logic [9:0]  e, d;
    logic [23:0] ma, mb;
    logic [26:0] xa, xb, shifted;
    logic [27:0] sum;
    logic        sticky, up;
    logic [24:0] rounded;
    logic        a_nan, b_nan, a_inf, b_inf;
    int          k;
    a_nan = (a[30:23] == 8'hff) && (a[22:0] != 0);
    b_nan = (b[30:23] == 8'hff) && (b[22:0] != 0);
    a_inf = (a[30:23] == 8'hff) && (a[22:0] == 0);
    b_inf = (b[30:23] == 8'hff) && (b[22:0] == 0);
    if (a_nan || b_nan || (a_inf && b_inf && (a[31] != b[31]))) return QNAN;
    if (a_inf) return a;
    if (b_inf) return b;
    // |a| >= |b| from here (swap), exponents of subnormals as 1.
    swap = b[30:0] > a[30:0];
    sa = swap ? b[31] : a[31];
    sb = swap ? a[31] : b[31];
    fa = swap ? b[30:23] : a[30:23];
    fb = swap ? a[30:23] : b[30:23];
    ma = {fa != 0, swap ? b[22:0] : a[22:0]};
    mb = {fb != 0, swap ? a[22:0] : b[22:0]};
    e = {2'd0, (fa == 0) ? 8'd1 : fa};
    d = e - {2'd0, (fb == 0) ? 8'd1 : fb};
    // Three more bits: guard, round, sticky.
    xa = {ma, 3'd0};
    xb = {mb, 3'd0};
    if (d >= 10'd27) begin
      shifted = {26'd0, mb != 0};
    end else begin
      shifted = xb >> d;
      sticky = 1'b0;
      for (int i = 0; i < 27; i++)
        if (i < int'(d) && xb[i]) sticky = 1'b1;
      shifted[0] = shifted[0] | sticky;
    end
    sr = sa;
    if (sa == sb) begin
      sum = {1'b0, xa} + {1'b0, shifted};
      if (sum[27]) begin
        sum = {1'b0, sum[27:2], sum[1] | sum[0]};
        e = e + 10'd1;
      end
    end else begin
      sum = {1'b0, xa} - {1'b0, shifted};
      if (sum == 28'd0) return 32'd0;  // x - x = +0
      // Normalise to bit 26, but not below the smallest exponent (subnormal).
      k = 0;
      for (int i = 0; i < 27; i++)
        if (sum[26 - i] == 1'b0 && k == i && e > 10'd1) begin
          k = i + 1;
          e = e - 10'd1;
        end
      sum = sum << k;
    end
    // Round to nearest even on [2:0] = guard, round, sticky.
    up = sum[2] && (sum[1] || sum[0] || sum[3]);
    rounded = {1'b0, sum[26:3]} + {24'd0, up};
    if (rounded[24]) begin
      rounded = rounded >> 1;
      e = e + 10'd1;
    end
    if (e >= 10'd255) return {sr, 8'hff, 23'd0};
    if (rounded[23] == 1'b0) return {sr, 8'd0, rounded[22:0]};  // subnormal (e is 1)
    return {sr, e[7:0], rounded[22:0]};
  endfunction

endpackage
