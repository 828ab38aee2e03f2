// A simulation model of the part of the ECP5 MULT18X18D block that hwgen instantiates
// (hwgen/hw/dsp.py): an 18x18 multiplier whose A and B inputs and P output are each either
// combinational ("NONE") or registered on CLK0 with clock enable CE0 and synchronous reset
// RST0. It lets Verilator run the netlist that hwgen gives nextpnr (simulate(..., target="ecp5")).
// Written for hwgen from the primitive's documented ports; the C input, cascade ports and
// pipeline register are not modelled.
/* verilator lint_off UNUSEDPARAM */
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter GSR = "ENABLED"
) (
    input A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
    input B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
    input CLK0, CE0, RST0, SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    output P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17,
    output P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32, P33, P34, P35
);
/* verilator lint_on UNUSEDPARAM */
    wire [17:0] a_in = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b_in = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_reg = 18'd0, b_reg = 18'd0;
    reg sa_reg = 1'b0, sb_reg = 1'b0;
    reg [35:0] p_reg = 36'd0;

    always @(posedge CLK0) begin
        if (RST0) begin
            a_reg <= 18'd0;
            b_reg <= 18'd0;
        end else if (CE0) begin
            a_reg <= a_in;
            b_reg <= b_in;
            sa_reg <= SIGNEDA;
            sb_reg <= SIGNEDB;
        end
    end

    wire [17:0] a = REG_INPUTA_CLK == "NONE" ? a_in : a_reg;
    wire [17:0] b = REG_INPUTB_CLK == "NONE" ? b_in : b_reg;
    wire sa = REG_INPUTA_CLK == "NONE" ? SIGNEDA : sa_reg;
    wire sb = REG_INPUTB_CLK == "NONE" ? SIGNEDB : sb_reg;
    wire [35:0] product = $signed({sa & a[17], a}) * $signed({sb & b[17], b});

    always @(posedge CLK0) begin
        if (RST0) p_reg <= 36'd0;
        else if (CE0) p_reg <= product;
    end

    wire [35:0] p = REG_OUTPUT_CLK == "NONE" ? product : p_reg;
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18,
            P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = p;

    wire unused = &{1'b0, SOURCEA, SOURCEB};
endmodule

// The part of the ECP5 DP16KD block RAM that hwgen instantiates (hwgen/hw/bram.py): 18 Kbit,
// both ports of one data width DATA_WIDTH_A = DATA_WIDTH_B (18, 9, 4, 2 or 1); the entry is
// AD[13:s] where s = 4, 3, 2, 1, 0 for those widths; a port writes DI when WE and CE are high
// and reads (the data before that edge's write) when CE is high; REGMODE "OUTREG" adds the
// output register (enabled by OCE). Byte enables, chip selects and resets are not modelled.
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off UNUSEDSIGNAL */
module DP16KD #(
    parameter integer DATA_WIDTH_A = 18,
    parameter integer DATA_WIDTH_B = 18,
    parameter REGMODE_A = "NOREG",
    parameter REGMODE_B = "NOREG",
    parameter RESETMODE = "SYNC",
    parameter CSDECODE_A = "0b000",
    parameter CSDECODE_B = "0b000",
    parameter WRITEMODE_A = "NORMAL",
    parameter WRITEMODE_B = "NORMAL",
    parameter GSR = "ENABLED"
) (
    input DIA0, DIA1, DIA2, DIA3, DIA4, DIA5, DIA6, DIA7, DIA8, DIA9, DIA10, DIA11, DIA12, DIA13, DIA14, DIA15, DIA16, DIA17,
    input ADA0, ADA1, ADA2, ADA3, ADA4, ADA5, ADA6, ADA7, ADA8, ADA9, ADA10, ADA11, ADA12, ADA13,
    input CEA, OCEA, CLKA, WEA, CSA0, CSA1, CSA2, RSTA,
    input DIB0, DIB1, DIB2, DIB3, DIB4, DIB5, DIB6, DIB7, DIB8, DIB9, DIB10, DIB11, DIB12, DIB13, DIB14, DIB15, DIB16, DIB17,
    input ADB0, ADB1, ADB2, ADB3, ADB4, ADB5, ADB6, ADB7, ADB8, ADB9, ADB10, ADB11, ADB12, ADB13,
    input CEB, OCEB, CLKB, WEB, CSB0, CSB1, CSB2, RSTB,
    output DOA0, DOA1, DOA2, DOA3, DOA4, DOA5, DOA6, DOA7, DOA8, DOA9, DOA10, DOA11, DOA12, DOA13, DOA14, DOA15, DOA16, DOA17,
    output DOB0, DOB1, DOB2, DOB3, DOB4, DOB5, DOB6, DOB7, DOB8, DOB9, DOB10, DOB11, DOB12, DOB13, DOB14, DOB15, DOB16, DOB17
);
    localparam integer W = DATA_WIDTH_A;
    localparam integer S = W == 18 ? 4 : W == 9 ? 3 : W == 4 ? 2 : W == 2 ? 1 : 0;
    localparam integer DEPTH = 16384 >> S;
    initial begin
        if (DATA_WIDTH_A != DATA_WIDTH_B || !(W == 18 || W == 9 || W == 4 || W == 2 || W == 1))
            $fatal(1, "DP16KD model: unsupported data widths %0d/%0d", DATA_WIDTH_A, DATA_WIDTH_B);
    end

    wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire [17:0] dib = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
    wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
    wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
    wire [13:0] ea = ada >> S, eb = adb >> S;

    reg [W-1:0] mem [0:DEPTH-1];
    reg [W-1:0] qa = 0, qb = 0, ra = 0, rb = 0;
    integer i;
    initial for (i = 0; i < DEPTH; i = i + 1) mem[i] = 0;

    always @(posedge CLKA) begin
        if (CEA) begin
            qa <= mem[ea[13 - S:0]];
            if (WEA) mem[ea[13 - S:0]] <= dia[W-1:0];
        end
        if (OCEA) ra <= qa;
    end
    always @(posedge CLKB) begin
        if (CEB) begin
            qb <= mem[eb[13 - S:0]];
            if (WEB) mem[eb[13 - S:0]] <= dib[W-1:0];
        end
        if (OCEB) rb <= qb;
    end

    wire [W-1:0] doa_w = REGMODE_A == "OUTREG" ? ra : qa;
    wire [W-1:0] dob_w = REGMODE_B == "OUTREG" ? rb : qb;
    wire [18:0] doa = {{(19 - W){1'b0}}, doa_w};  // zero-extended (19 - W >= 1)
    wire [18:0] dob = {{(19 - W){1'b0}}, dob_w};
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = doa[17:0];
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob[17:0];
endmodule
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNUSEDPARAM */
