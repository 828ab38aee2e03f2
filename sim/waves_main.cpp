// The main of a simulator built with waves: cocotb's Verilator main, whose FST writer records
// only a window of clock cycles when hwgen asks for one.
//
// The window comes from the environment, in clock cycles counted from the kernel's first cycle
// (the cycle that `measured` and the timelines count from):
//   HWGEN_WAVES_FROM, HWGEN_WAVES_TO  the window [FROM, TO) (TO absent: to the end); without
//                                     FROM every time step is kept
//   HWGEN_WAVES_PERIOD_NS             the clock period
//   HWGEN_WAVES_ORIGIN_NS             the time of the kernel's first cycle: the testbench sets it
//                                     in this process when it starts the run it measures
// Time steps before the origin is known are left out. The runner compiles this file in place of
// cocotb's verilator.cpp, with cocotb's folder on the include path.

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "verilated.h"

#if VM_TRACE_FST
#include "verilated_fst_c.h"

class HwgenWindowedFst : public VerilatedFstC {
  public:
    void dump(uint64_t time) {
        if (keep(time)) VerilatedFstC::dump(time);
    }

  private:
    bool m_read = false;      // the window's bounds are read
    bool m_window = false;    // a window was asked for
    bool m_placed = false;    // its origin is known, and m_from/m_to are in time steps
    double m_from_cycles = 0, m_to_cycles = 0, m_period_ns = 0;
    uint64_t m_from = 0, m_to = 0;

    static double number(const char* name) {
        const char* text = std::getenv(name);
        return text ? std::atof(text) : -1.0;
    }

    bool keep(uint64_t time) {
        if (!m_read) {
            m_read = true;
            m_from_cycles = number("HWGEN_WAVES_FROM");
            m_to_cycles = number("HWGEN_WAVES_TO");
            m_period_ns = number("HWGEN_WAVES_PERIOD_NS");
            m_window = m_from_cycles >= 0 && m_period_ns > 0;
        }
        if (!m_window) return true;
        if (!m_placed) {
            const double origin_ns = number("HWGEN_WAVES_ORIGIN_NS");
            if (origin_ns < 0) return false;
            // time steps per ns: the precision is 10^timeprecision() s (e.g. -12: 1000 per ns)
            const double steps = std::pow(10.0, -9 - Verilated::threadContextp()->timeprecision());
            m_from = static_cast<uint64_t>(std::llround((origin_ns + m_from_cycles * m_period_ns) * steps));
            m_to = m_to_cycles < 0 ? UINT64_MAX
                                   : static_cast<uint64_t>(std::llround((origin_ns + m_to_cycles * m_period_ns) * steps));
            m_placed = true;
        }
        return m_from <= time && time < m_to;
    }
};

#define VerilatedFstC HwgenWindowedFst
#endif

#include "verilator.cpp"
