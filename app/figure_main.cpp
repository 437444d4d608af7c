// embedlab-figure: `figure KIND ...` and `demo ...`, headless. embedlab-cli execs
// it for those commands (argv[0] "embedlab-cli"), so its messages read as the
// CLI's. Exit codes as the CLI's: 0, 2 bad input, 1 internal error, 130 cancelled.
#include <QApplication>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "figure_tool.hpp"

namespace embedlab {
void init_runtime();
void restart_with_passive_openmp(char** argv);
} // namespace embedlab

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int)
{
    g_interrupted = true;
}

const char* kUsage =
    R"(usage: embedlab-figure figure spectrum|iprs|neighbours|fourier|tt|pareto [MODEL | RESULTS.json]
                       --out FILE.png|.pdf|.svg [--width single|double|slide] [--aspect A] [--dpi N] [...]
       embedlab-figure demo [--out DIR] [--quick]
(normally run as embedlab-cli figure / embedlab-cli demo; see embedlab-cli help)
)";

// Qt's own chatter (fonts, XDG_RUNTIME_DIR) would break the one-line error contract.
void quiet_qt_messages(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    if (type == QtCriticalMsg || type == QtFatalMsg || std::getenv("EMBEDLAB_QT_MESSAGES"))
        std::fprintf(stderr, "qt: %s\n", qPrintable(message));
}

} // namespace

int main(int argc, char** argv)
{
    using namespace embedlab;
    const std::string program = std::filesystem::path(argc > 0 ? argv[0] : "embedlab-figure").filename();
    const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
    if (args.empty() || (args[0] != "figure" && args[0] != "demo")) {
        std::fputs(kUsage, args.empty() || args[0] == "--help" ? stdout : stderr);
        return args.empty() || args[0] == "--help" ? 0 : 2;
    }
    restart_with_passive_openmp(argv);
    // No display needed: render offscreen unless a platform or a display is set.
    if (!std::getenv("QT_QPA_PLATFORM") && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
        setenv("QT_QPA_PLATFORM", "offscreen", 1);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    const auto interrupted = [] { return g_interrupted.load(); };
    try {
        // Every argument is checked before Qt or the engine starts.
        app::FigureRequest figure;
        app::DemoRequest demo;
        if (args[0] == "figure")
            figure = app::parse_figure_arguments(args);
        else
            demo = app::parse_demo_arguments(args);
        qInstallMessageHandler(quiet_qt_messages);
        int qt_argc = 1;
        char* qt_argv[] = {argv[0], nullptr};
        QApplication application(qt_argc, qt_argv);
        init_runtime();
        if (args[0] == "demo") {
            app::run_demo(demo, interrupted);
        } else {
            app::render_figure(figure, app::stderr_progress("figure " + figure.kind, interrupted));
            for (const auto& out : figure.outs)
                std::fprintf(stderr, "%sfigure %s: wrote %s\n", isatty(2) ? "\r" : "", figure.kind.c_str(),
                             out.c_str());
        }
        return g_interrupted ? 130 : 0;
    } catch (const InputError& e) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
        return 2;
    } catch (const Cancelled&) {
        std::fprintf(stderr, "%s%s: cancelled\n", isatty(2) ? "\n" : "", program.c_str());
        return 130;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", program.c_str(), e.what());
        return 1;
    }
}
