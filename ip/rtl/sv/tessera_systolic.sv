// The tensor core's systolic array tile, weight stationary, ROWS x COLS
// processing elements (default 8 x 8), the RTL counterpart of the model in
// ip/engines/tensor/systolic.hpp.
//
// Weights: ROWS handshakes on w_valid/w_ready, one row of COLS 8-bit
// weights each (w_row says which), while no activation is in flight.
// Activations: one handshake on a_valid/a_ready per row of A: ROWS 8-bit
// values (the K slice) and COLS 32-bit initial partial sums (c_in: zero,
// or the previous K slice's result). Row r of the array multiplies
// element r by its weights and adds the product to the partial sum coming
// down each column, so each output is the sequential sum the model forms,
// in K order, rounded at every addition. Results: one handshake on
// o_valid/o_ready per activation row, COLS 32-bit sums, ROWS + COLS cycles
// after it went in; the array stalls while o_ready is low.
// mode: 0 INT8 x INT8 into a wrapping INT32 sum; 1 FP8 E4M3 into FP32.
module tessera_systolic #(
    parameter int ROWS = 8,
    parameter int COLS = 8
) (
    input  logic                   clk,
    input  logic                   rst_n,
    input  logic                   mode,
    // weights
    input  logic                   w_valid,
    output logic                   w_ready,
    input  logic [7:0]             w_row,
    input  logic [COLS*8-1:0]      w_data,
    // activations and initial partial sums
    input  logic                   a_valid,
    output logic                   a_ready,
    input  logic [ROWS*8-1:0]      a_data,
    input  logic [COLS*32-1:0]     c_in,
    // results
    output logic                   o_valid,
    input  logic                   o_ready,
    output logic [COLS*32-1:0]     o_data,
    // status: activation rows inside the array
    output logic [15:0]            in_flight
);
  import tessera_fp::*;


  logic [7:0]  w    [ROWS][COLS];
  // Input skew: element r of a row enters row r after r cycles; c_in of
  // column c enters the top row after c cycles.
  logic [7:0]  askew [ROWS][ROWS];
  logic        askv  [ROWS][ROWS];
  logic [31:0] cskew [COLS][COLS];
  logic        cskv  [COLS][COLS];
  // Output deskew: column c waits COLS - 1 - c cycles.
  logic [31:0] oskew [COLS][COLS];
  logic        oskv  [COLS][COLS];

  logic advance;
  logic [15:0] count;
  // The array moves unless a finished row waits for the consumer.
  assign advance = !(oskv[0][0] && !o_ready);
  assign a_ready = advance;
  assign w_ready = (count == 16'd0) && !a_valid;
  assign in_flight = count;

  function automatic logic [31:0] mac(input logic m, input logic [31:0] s, input logic [7:0] x, input logic [7:0] y);
    logic signed [15:0] p;
    if (m) return fp32_add(s, e4m3_mul(x, y));
    p = 16'($signed(x) * $signed(y));
    return s + {{16{p[15]}}, p};
  endfunction

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      count <= 16'd0;
      for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) w[r][c] <= 8'd0;
      for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < ROWS; j++) begin
          askew[i][j] <= 8'd0;
          askv[i][j] <= 1'b0;
        end
      for (int i = 0; i < COLS; i++)
        for (int j = 0; j < COLS; j++) begin
          cskew[i][j] <= 32'd0;
          cskv[i][j] <= 1'b0;
          oskew[i][j] <= 32'd0;
          oskv[i][j] <= 1'b0;
        end
    end else begin
      if (w_valid && w_ready && int'(w_row) < ROWS)
        for (int c = 0; c < COLS; c++) w[int'(w_row)][c] <= w_data[c*8+:8];
      if (advance) begin
        count <= count + {15'd0, a_valid} - {15'd0, oskv[0][0] && o_ready};
        // Skew registers: stage 0 takes the new row, stage j the one before.
        for (int r = 0; r < ROWS; r++) begin
          askew[r][0] <= a_data[r*8+:8];
          askv[r][0] <= a_valid;
          for (int j = 1; j < ROWS; j++) begin
            askew[r][j] <= askew[r][j-1];
            askv[r][j] <= askv[r][j-1];
          end
        end
        for (int c = 0; c < COLS; c++) begin
          cskew[c][0] <= c_in[c*32+:32];
          cskv[c][0] <= a_valid;
          for (int j = 1; j < COLS; j++) begin
            cskew[c][j] <= cskew[c][j-1];
            cskv[c][j] <= cskv[c][j-1];
          end
        end
        // Deskew: column c's result waits COLS - 1 - c more cycles; stage 0 is the output.
        for (int c = 0; c < COLS; c++) begin
          oskew[c][COLS-1] <= bottom[c];
          oskv[c][COLS-1] <= bottom_v[c];
          for (int j = 0; j < COLS - 1; j++) begin
            oskew[c][j] <= (j >= COLS - 1 - c) ? bottom[c] : oskew[c][j+1];
            oskv[c][j] <= (j >= COLS - 1 - c) ? bottom_v[c] : oskv[c][j+1];
          end
        end
      end
    end
  end

  // The processing elements: PE (r, c) takes the activation from its left
  // (or the skew for column 0) and the partial sum from above (or c_in's
  // skew for row 0), multiplies by its weight and adds.
  logic [31:0] bottom   [COLS];
  logic        bottom_v [COLS];
  for (genvar r = 0; r < ROWS; r++) begin : row
    for (genvar c = 0; c < COLS; c++) begin : pe
      /* verilator lint_off UNUSEDSIGNAL */  // the last column passes its activation to no one
      logic [7:0]  act_q;
      logic        actv_q;
      /* verilator lint_on UNUSEDSIGNAL */
      logic [31:0] psum_q;
      logic        psv_q;
      logic [7:0]  x;
      logic        xv, sv;
      logic [31:0] s;
      if (c == 0) begin : left
        if (r == 0) begin : corner
          assign x = a_data[7:0];
          assign xv = a_valid;
        end else begin : skewed
          assign x = askew[r][r-1];
          assign xv = askv[r][r-1];
        end
      end else begin : inner
        assign x = row[r].pe[c-1].act_q;
        assign xv = row[r].pe[c-1].actv_q;
      end
      if (r == 0) begin : top
        if (c == 0) begin : corner
          assign s = c_in[31:0];
          assign sv = a_valid;
        end else begin : skewed
          assign s = cskew[c][c-1];
          assign sv = cskv[c][c-1];
        end
      end else begin : below
        assign s = row[r-1].pe[c].psum_q;
        assign sv = row[r-1].pe[c].psv_q;
      end
      always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
          act_q <= 8'd0;
          actv_q <= 1'b0;
          psum_q <= 32'd0;
          psv_q <= 1'b0;
        end else if (advance) begin
          act_q <= x;
          actv_q <= xv;
          psum_q <= xv ? mac(mode, s, x, w[r][c]) : s;
          psv_q <= sv;
        end
      end
      if (r == ROWS - 1) begin : out
        assign bottom[c] = psum_q;
        assign bottom_v[c] = psv_q;
      end
    end
  end

  assign o_valid = oskv[0][0];
  always_comb
    for (int c = 0; c < COLS; c++) o_data[c*32+:32] = oskew[c][0];

endmodule
