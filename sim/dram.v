// hwgen's DRAM model: CHANNELS channels (1 or 2) into one memory, each with fixed (optionally
// jittered) read latency and WORDS words per beat each way. A channel is described in
// hwgen/hw/memchannel.py; channel c's signals are bit c (or the c-th field) of each port.
//
// - A read request accepted in cycle t is answered by one beat in cycle t + LATENCY or later
//   (+ up to JITTER random cycles), always in request order on its channel. Words past the end
//   of memory read as zero; a request whose first word is past the end sets `fault`.
// - A write beat is accepted every cycle (wr_ready = 1) and lands at that clock edge; a write
//   to a word past the end sets `fault`. Channel 1's write lands after channel 0's.
// - With JITTER > 0 the channels also refuse read requests and write beats (ready low), each
//   in about one cycle in four at random, so that clients meet backpressure.
// - Memory contents are loaded at time 0 from the file named by +DRAM_IN=<file> ($readmemh) and
//   written to +DRAM_OUT=<file> ($writememh) on a clock edge where `dump` is high.
// With ID >= 0 (one model per PE of a mesh) the files are <file>.<ID>.
// Run-time settings: +DRAM_LATENCY=<n> (default 20), +DRAM_JITTER=<n> (default 0),
// +DRAM_SEED=<n> (nonzero, for the jitter), +DRAM_STALL_AFTER=<n> (a fault for testing hang
// reports: after accepting n read requests the channels never accept another).
`timescale 1ns/1ps
module hwgen_dram #(
    parameter integer WORD_W = 32,
    parameter integer WORDS = 4,
    parameter integer ADDR_W = 32,
    parameter integer DEPTH_LOG2 = 16,
    parameter integer TAG_W = 1,
    parameter integer QUEUE_LOG2 = 9,
    parameter integer ID = -1,
    parameter integer CHANNELS = 1
) (
    input  wire                               clk,
    input  wire                               rst,
    input  wire [CHANNELS-1:0]                rd_req_valid,
    output wire [CHANNELS-1:0]                rd_req_ready,
    input  wire [CHANNELS*ADDR_W-1:0]         rd_req_addr,
    input  wire [CHANNELS*TAG_W-1:0]          rd_req_tag,
    output wire [CHANNELS-1:0]                rd_resp_valid,
    input  wire [CHANNELS-1:0]                rd_resp_ready,
    output reg  [CHANNELS*WORDS*WORD_W-1:0]   rd_resp_data,
    output wire [CHANNELS*TAG_W-1:0]          rd_resp_tag,
    input  wire [CHANNELS-1:0]                wr_valid,
    output wire [CHANNELS-1:0]                wr_ready,
    input  wire [CHANNELS*ADDR_W-1:0]         wr_addr,
    input  wire [CHANNELS*WORDS*WORD_W-1:0]   wr_data,
    input  wire [CHANNELS*WORDS-1:0]          wr_mask,
    input  wire                               dump,
    output reg                                fault
);
    localparam integer DEPTH = 1 << DEPTH_LOG2;
    localparam integer QN = 1 << QUEUE_LOG2;

    reg [WORD_W-1:0] mem [0:DEPTH-1];
    integer latency;
    integer jitter;
    integer stall_after;
    integer accepted;
    reg [31:0] lfsr;
    string in_file;
    string out_file;

    initial begin
        latency = 20;
        jitter = 0;
        lfsr = 32'd1;
        fault = 1'b0;
        if (!$value$plusargs("DRAM_LATENCY=%d", latency)) latency = 20;
        if (!$value$plusargs("DRAM_JITTER=%d", jitter)) jitter = 0;
        if (!$value$plusargs("DRAM_STALL_AFTER=%d", stall_after)) stall_after = -1;
        accepted = 0;
        if (!$value$plusargs("DRAM_SEED=%d", lfsr)) lfsr = 32'd1;
        if (lfsr == 32'd0) lfsr = 32'd1;
        if ($value$plusargs("DRAM_IN=%s", in_file)) begin
            if (ID >= 0) in_file = $sformatf("%s.%0d", in_file, ID);
            $readmemh(in_file, mem);
        end
        if (!$value$plusargs("DRAM_OUT=%s", out_file)) out_file = "dram_out.hex";
        if (ID >= 0) out_file = $sformatf("%s.%0d", out_file, ID);
    end

    // ---------------------------------------------------------------- reads
    // channel c's queue is entries c*QN .. c*QN + QN - 1
    reg [ADDR_W-1:0] q_addr [0:CHANNELS*QN-1];
    reg [TAG_W-1:0]  q_tag  [0:CHANNELS*QN-1];
    reg [63:0]       q_time [0:CHANNELS*QN-1];
    reg [QUEUE_LOG2:0] count [0:CHANNELS-1];
    reg [QUEUE_LOG2-1:0] head [0:CHANNELS-1];
    reg [QUEUE_LOG2-1:0] tail [0:CHANNELS-1];
    reg [63:0] last_time [0:CHANNELS-1];
    reg [63:0] now;

    // backpressure under jitter: a free-running LFSR of its own drops each ready at random
    reg [31:0] stall;
    initial stall = 32'h5eed1234;
    always @(posedge clk) stall <= {stall[30:0], stall[31] ^ stall[21] ^ stall[1] ^ stall[0]};
    wire stalled = (stall_after >= 0) && (accepted >= stall_after);
    wire [CHANNELS-1:0] push = rd_req_valid & rd_req_ready;
    wire [CHANNELS-1:0] pop = rd_resp_valid & rd_resp_ready;

    genvar gc;
    generate
        for (gc = 0; gc < CHANNELS; gc = gc + 1) begin : channel
            wire [QUEUE_LOG2-1:0] h = head[gc];
            wire [31:0] at = gc * QN + {{(32-QUEUE_LOG2){1'b0}}, h};
            wire refuse_rd = (jitter > 0) && (stall[3 + 4 * gc -: 2] == 2'b00);
            wire refuse_wr = (jitter > 0) && (stall[9 + 4 * gc -: 2] == 2'b00);
            assign rd_req_ready[gc] = (count[gc] < QN) && !refuse_rd && !stalled;
            assign rd_resp_valid[gc] = (count[gc] != 0) && (q_time[at] <= now);
            assign rd_resp_tag[gc*TAG_W +: TAG_W] = q_tag[at];
            assign wr_ready[gc] = !refuse_wr;
        end
    endgenerate

    integer rc;
    integer rk;
    integer wk;
    always @* begin
        for (rc = 0; rc < CHANNELS; rc = rc + 1) begin
            for (rk = 0; rk < WORDS; rk = rk + 1) begin
                if ({32'd0, q_addr[rc * QN + head[rc]]} + rk < DEPTH)
                    rd_resp_data[(rc * WORDS + rk)*WORD_W +: WORD_W] = mem[q_addr[rc * QN + head[rc]] + rk];
                else
                    rd_resp_data[(rc * WORDS + rk)*WORD_W +: WORD_W] = {WORD_W{1'b0}};
            end
        end
    end

    reg [63:0] due;
    reg [ADDR_W-1:0] a;
    always @(posedge clk) begin
        if (rst) begin
            for (rc = 0; rc < CHANNELS; rc = rc + 1) begin
                count[rc] <= 0;
                head[rc] <= 0;
                tail[rc] <= 0;
                last_time[rc] <= 0;
            end
            now <= 0;
        end else begin
            now <= now + 1;
            for (rc = 0; rc < CHANNELS; rc = rc + 1) begin
                if (push[rc]) begin
                    accepted = accepted + 1;
                    due = now + latency;
                    if (jitter > 0) begin
                        due = due + ({32'd0, lfsr} % (jitter + 1));
                        lfsr = {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};
                    end
                    if (due < last_time[rc]) due = last_time[rc];
                    last_time[rc] <= due;
                    a = rd_req_addr[rc*ADDR_W +: ADDR_W];
                    q_addr[rc * QN + tail[rc]] <= a;
                    q_tag[rc * QN + tail[rc]] <= rd_req_tag[rc*TAG_W +: TAG_W];
                    q_time[rc * QN + tail[rc]] <= due;
                    tail[rc] <= tail[rc] + 1;
                    if ({32'd0, a} >= DEPTH) fault <= 1'b1;
                end
                if (pop[rc]) head[rc] <= head[rc] + 1;
                count[rc] <= count[rc] + (push[rc] ? 1 : 0) - (pop[rc] ? 1 : 0);
            end
        end
    end

    // ---------------------------------------------------------------- writes
    always @(posedge clk) begin
        for (rc = 0; rc < CHANNELS; rc = rc + 1) begin
            if (!rst && wr_valid[rc] && wr_ready[rc]) begin
                a = wr_addr[rc*ADDR_W +: ADDR_W];
                for (wk = 0; wk < WORDS; wk = wk + 1) begin
                    if (wr_mask[rc * WORDS + wk]) begin
                        if ({32'd0, a} + wk < DEPTH)
                            mem[a + wk] <= wr_data[(rc * WORDS + wk)*WORD_W +: WORD_W];
                        else
                            fault <= 1'b1;
                    end
                end
            end
        end
        if (dump) $writememh(out_file, mem);
    end
endmodule
