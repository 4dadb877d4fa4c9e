// One direction of the SerDes link layer, the RTL counterpart of
// ip/c2c/link.hpp: the transmitter frames each FLIT (8-byte header:
// type 1, last-of-message flag, 16-bit sequence number, 16-bit payload
// length; 244 payload bytes; CRC-32 of the first 252 bytes, little end
// first), keeps it in a replay buffer of WINDOW FLITs and sends it as 32
// beats of 8 bytes; the receiver checks the CRC and the sequence number,
// hands good FLITs on and answers ACK (good) or NAK (bad CRC or out of
// order, once per error, naming the FLIT it expects); on a NAK the
// transmitter goes back to that FLIT and sends it and everything after it
// again (go-back-N). The wire between them is the testbench's (it may
// corrupt a beat); so is the ACK/NAK path back.
module tessera_link #(
    parameter int WINDOW = 8
) (
    input  logic        clk,
    input  logic        rst_n,
    // payload in: a FLIT's 244 bytes as 31 beats (the last one's upper 4 bytes unused)
    input  logic        p_valid,
    output logic        p_ready,
    input  logic [63:0] p_data,
    input  logic [7:0]  p_len,    // payload bytes of this FLIT (with every beat)
    input  logic        p_last,   // the FLIT ends its message (with every beat)
    // the wire, transmitter side
    output logic        tx_valid,
    output logic [63:0] tx_data,
    // the wire, receiver side
    input  logic        rx_valid,
    input  logic [63:0] rx_data,
    // acknowledgements: the receiver's out, the transmitter's in
    output logic        ack_valid,
    output logic        ack_nak,
    output logic [15:0] ack_seq,
    input  logic        a_valid,
    input  logic        a_nak,
    input  logic [15:0] a_seq,
    // good FLITs out: header beat first, then 31 payload beats
    output logic        o_valid,
    output logic [63:0] o_data,
    output logic        o_first,
    // counters
    output logic [31:0] sent,       // FLIT transmissions (replays included)
    output logic [31:0] naks,       // NAKs received
    output logic [31:0] crc_errors  // FLITs the receiver refused for their CRC
);
  localparam int BEATS = 32;

  // CRC-32 (reflected, polynomial 0xedb88320) over `n` bytes of a beat.
  function automatic logic [31:0] crc_bytes(input logic [31:0] c, input logic [63:0] d, input int n);
    logic [31:0] r;
    r = c;
    for (int b = 0; b < 8; b++)
      if (b < n) begin
        r = r ^ {24'd0, d[b*8+:8]};
        for (int i = 0; i < 8; i++) r = r[0] ? ((r >> 1) ^ 32'hedb8_8320) : (r >> 1);
      end
    return r;
  endfunction

  // ---- transmitter ----------------------------------------------------
  logic [63:0] buffer [WINDOW][BEATS];
  logic [15:0] next_seq;   // the next new FLIT's number
  logic [15:0] base;       // the oldest FLIT not acknowledged
  logic [15:0] send_seq;   // the FLIT being sent
  logic [5:0]  beat;       // its beat on the wire (32: idle)
  logic [5:0]  fill;       // beats of the FLIT being framed
  logic [31:0] crc;
  logic        rewind;     // a NAK came: go back to rewind_seq once the FLIT on the wire is out
  logic [15:0] rewind_seq;

  wire full = (next_seq - base) >= 16'(WINDOW);
  assign p_ready = !full;
  // A new FLIT, framed from the payload beats: beat 0 the header, 1..31 the payload, CRC in the last.
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      next_seq <= 16'd0;
      fill <= 6'd0;
      crc <= 32'hffff_ffff;
    end else if (p_valid && p_ready) begin
      logic [63:0] header, d;
      logic [31:0] c;
      logic [5:0]  at;  // this payload beat's place in the FLIT (1..31)
      at = (fill == 6'd0) ? 6'd1 : fill;
      header = {16'd0, 8'd0, p_len, next_seq, 7'd0, p_last, 8'd1};
      if (fill == 6'd0) begin
        c = crc_bytes(32'hffff_ffff, header, 8);
        buffer[next_seq[$clog2(WINDOW)-1:0]][0] <= header;
        fill <= 6'd1;
      end else begin
        c = crc;
      end
      // Payload bytes past the length are zero on the wire.
      d = p_data;
      for (int b = 0; b < 8; b++)
        if (int'(at) * 8 + b - 8 >= int'(p_len)) d[b*8+:8] = 8'd0;
      if (at == 6'd31) begin
        c = crc_bytes(c, d, 4);
        buffer[next_seq[$clog2(WINDOW)-1:0]][31] <= {~c, d[31:0]};
        next_seq <= next_seq + 16'd1;
        fill <= 6'd0;
        crc <= 32'hffff_ffff;
      end else begin
        c = crc_bytes(c, d, 8);
        buffer[next_seq[$clog2(WINDOW)-1:0]][at[4:0]] <= d;
        fill <= at + 6'd1;
        crc <= c;
      end
    end
  end

  // Sending: FLITs send_seq .. next_seq - 1, beat by beat; a NAK rewinds.
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      base <= 16'd0;
      send_seq <= 16'd0;
      beat <= 6'd32;
      tx_valid <= 1'b0;
      tx_data <= 64'd0;
      sent <= 32'd0;
      naks <= 32'd0;
      rewind <= 1'b0;
      rewind_seq <= 16'd0;
    end else begin
      tx_valid <= 1'b0;
      if (a_valid && !a_nak && (a_seq - base) < (next_seq - base)) base <= a_seq + 16'd1;
      if (a_valid && a_nak) begin
        naks <= naks + 32'd1;
        base <= a_seq;
        rewind <= 1'b1;  // go back: this FLIT and everything after it again
        rewind_seq <= a_seq;
      end
      if (beat != 6'd32) begin
        tx_valid <= 1'b1;
        tx_data <= buffer[send_seq[$clog2(WINDOW)-1:0]][beat[4:0]];
        if (beat == 6'd31) begin
          send_seq <= send_seq + 16'd1;
          // The next FLIT follows without a gap unless a NAK is pending.
          if (!rewind && !(a_valid && a_nak) && (send_seq + 16'd1) != next_seq) begin
            beat <= 6'd0;
            sent <= sent + 32'd1;
          end else begin
            beat <= 6'd32;
          end
        end else begin
          beat <= beat + 6'd1;
        end
      end else if (rewind && !(a_valid && a_nak)) begin
        send_seq <= rewind_seq;
        rewind <= 1'b0;
      end else if (send_seq != next_seq && !rewind) begin
        beat <= 6'd0;
        sent <= sent + 32'd1;
      end
    end
  end

  // ---- receiver -------------------------------------------------------
  logic [63:0] rbuf [BEATS];
  logic [5:0]  rbeat;
  logic [31:0] rcrc;
  logic [15:0] expect_seq;
  logic        nak_sent;  // one NAK per error until the expected FLIT arrives
  logic [5:0]  obeat;     // handing a good FLIT out (32: idle)

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rbeat <= 6'd0;
      rcrc <= 32'hffff_ffff;
      expect_seq <= 16'd0;
      nak_sent <= 1'b0;
      ack_valid <= 1'b0;
      ack_nak <= 1'b0;
      ack_seq <= 16'd0;
      crc_errors <= 32'd0;
      obeat <= 6'd32;
      o_valid <= 1'b0;
      o_first <= 1'b0;
      o_data <= 64'd0;
    end else begin
      ack_valid <= 1'b0;
      o_valid <= 1'b0;
      o_first <= 1'b0;
      if (obeat != 6'd32) begin
        o_valid <= 1'b1;
        o_first <= obeat == 6'd0;
        o_data <= rbuf[obeat[4:0]];
        obeat <= obeat == 6'd31 ? 6'd32 : obeat + 6'd1;
      end
      if (rx_valid) begin
        rbuf[rbeat[4:0]] <= rx_data;
        if (rbeat == 6'd31) begin
          logic [31:0] c;
          logic good, in_order;
          c = ~crc_bytes(rcrc, rx_data, 4);
          good = c == rx_data[63:32];
          in_order = rbuf[0][31:16] == expect_seq;
          rbeat <= 6'd0;
          rcrc <= 32'hffff_ffff;
          if (!good) crc_errors <= crc_errors + 32'd1;
          if (good && in_order) begin
            expect_seq <= expect_seq + 16'd1;
            nak_sent <= 1'b0;
            ack_valid <= 1'b1;
            ack_nak <= 1'b0;
            ack_seq <= expect_seq;
            obeat <= 6'd0;
          end else if (!nak_sent) begin
            nak_sent <= 1'b1;
            ack_valid <= 1'b1;
            ack_nak <= 1'b1;
            ack_seq <= expect_seq;
          end
        end else begin
          rcrc <= crc_bytes(rcrc, rx_data, 8);
          rbeat <= rbeat + 6'd1;
        end
      end
    end
  end

endmodule
