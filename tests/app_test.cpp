// The workbench's engine thread: jobs run in order off the GUI thread, report
// progress, deliver results on the GUI thread, fail with the engine's message,
// cancel; the event loop keeps running (stalls are measured, > 100 ms fails).
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QInputDialog>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <QTreeWidget>
#include <QUrl>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "analyses_internal.hpp"
#include "checked_spin_box.hpp"
#include "embedlab/experiment_request.hpp"
#include "fourier_map_view.hpp"
#include "gui_test_support.hpp"
#include "job_controller.hpp"
#include "jobs_dock.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "rank_allocation_view.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "test_support.hpp"

using embedlab::ProgressFn;
using embedlab::app::JobController;

namespace {

// The GUI thread's time on a core and waiting for one, from its schedstat (ns).
struct ThreadTimes {
    double on_cpu_ms = 0, runnable_ms = 0;
};
ThreadTimes gui_thread_times()
{
    std::ifstream in("/proc/thread-self/schedstat");
    double on_cpu = 0, waiting = 0;
    in >> on_cpu >> waiting;
    return {on_cpu / 1e6, waiting / 1e6};
}

// The event loop's worst stall, and what the kernel saw the GUI thread do in it.
struct Stall {
    double gap_ms = 0;      // longest time between two 5 ms ticks
    double on_cpu_ms = 0;   // the GUI thread working (a slow slot, a replot)
    double runnable_ms = 0; // the GUI thread ready but waiting for a core
    double ours() const { return on_cpu_ms + runnable_ms; }
};
Stall last_stall;

// Runs the event loop until `done` or the timeout and returns the worst stall
// that is the application's: the GUI thread's own work plus its wait for a core
// (the engine's threads competing), from its schedstat. The rest of a gap is the
// thread asleep past its tick: on this 2-core VM even a bare program's 5 ms
// poll() wakes up to 105 ms late while two threads compute (measured), whoever
// owns the threads. last_stall keeps the longest raw gap too.
template <class Done> double run_until(Done done, int timeout_ms = 60000)
{
    QElapsedTimer clock, gap;
    clock.start();
    gap.start();
    double worst = 0;
    last_stall = {};
    ThreadTimes before = gui_thread_times();
    // The application's own kind of loop (exec, as QApplication::exec runs), left
    // from the tick once `done`: processEvents(flags, maxtime) never sleeps, and a
    // GUI thread spinning on a core would be measured competing for it.
    QEventLoop loop;
    QTimer tick;
    tick.setTimerType(Qt::PreciseTimer);
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const auto now = gui_thread_times();
        const Stall stall{static_cast<double>(gap.elapsed()), now.on_cpu_ms - before.on_cpu_ms,
                          now.runnable_ms - before.runnable_ms};
        worst = std::max(worst, stall.ours());
        if (stall.gap_ms > last_stall.gap_ms)
            last_stall = stall;
        before = now;
        gap.restart();
        if (done() || clock.elapsed() >= timeout_ms)
            loop.quit();
    });
    tick.start(5);
    if (!done())
        loop.exec();
    EXPECT_TRUE(done()) << "timed out after " << timeout_ms << " ms";
    return worst;
}

// The application's stall under 100 ms; a raw gap far beyond the platform's late
// wake-ups would be the GUI thread blocked (a lock held by the engine thread).
void expect_responsive(double stall)
{
    EXPECT_LT(stall, 100.0) << "the GUI thread worked or waited for a core " << stall << " ms on end";
    EXPECT_LT(last_stall.gap_ms, 250.0)
        << "event loop stalled " << last_stall.gap_ms << " ms (GUI thread on a core " << last_stall.on_cpu_ms
        << " ms, waiting for one " << last_stall.runnable_ms << " ms)";
}

// Busy work for about `ms`, reporting progress very often.
void busy(int ms, const ProgressFn& progress)
{
    QElapsedTimer t;
    t.start();
    int64_t i = 0;
    while (t.elapsed() < ms)
        embedlab::report_progress(progress, ++i, 0);
    embedlab::report_progress(progress, 1, 1);
}

// Shows the window, opens `model` and waits for its load and analyses; returns the
// worst event-loop stall meanwhile. The window's first paint (font database, style)
// is start-up, not loading: done before the clock starts.
double open_and_analyse(embedlab::app::MainWindow& window, const QString& model, int timeout_ms)
{
    window.show();
    window.repaint();
    QApplication::processEvents();
    bool shown = false;
    const auto connection = QObject::connect(&window, &embedlab::app::MainWindow::modelShown, [&](bool ok) {
        EXPECT_TRUE(ok);
        shown = true;
    });
    window.openModel(model);
    const double stall = run_until([&] { return shown && window.jobs().idle(); }, timeout_ms);
    QObject::disconnect(connection); // `shown` ends here
    return stall;
}

// The method panel's every page, chosen method and target: the panel saves them
// when destroyed, so a test that changes them puts them back for the next window.
class PanelState {
public:
    explicit PanelState(const embedlab::app::MethodPanel& panel)
        : method_(panel.method()), target_(panel.target())
    {
        for (const QString& m : embedlab::app::MethodPanel::methods())
            requests_.push_back(panel.request(m));
    }
    void restore(embedlab::app::MethodPanel& panel) const
    {
        for (const auto& r : requests_)
            panel.setRequest(r);
        panel.setMethod(method_);
        panel.setTarget(target_);
    }

private:
    QString method_;
    embedlab::app::RunTarget target_;
    std::vector<embedlab::CompressionRequest> requests_;
};

} // namespace

TEST(JobController, RunsInOrderOffTheGuiThreadAndDeliversOnIt)
{
    JobController jobs;
    std::vector<QString> log;
    int progress_signals = 0, finished = 0;
    QObject::connect(&jobs, &JobController::progress, [&](int, qint64, qint64) { ++progress_signals; });
    QObject::connect(&jobs, &JobController::finished, [&](int, double) { ++finished; });
    QThread* gui = QThread::currentThread();
    for (const QString name : {"a", "b", "c"})
        jobs.submit(name, [&, name, gui](const ProgressFn& progress) -> std::function<void()> {
            EXPECT_NE(QThread::currentThread(), gui);
            busy(150, progress);
            return [&, name, gui] {
                EXPECT_EQ(QThread::currentThread(), gui);
                log.push_back(name);
            };
        });
    const double stall = run_until([&] { return finished == 3; });
    EXPECT_EQ(log, (std::vector<QString>{"a", "b", "c"}));
    EXPECT_TRUE(jobs.idle());
    // Millions of progress calls, throttled to a few signals per job.
    EXPECT_GE(progress_signals, 3);
    EXPECT_LT(progress_signals, 60);
    expect_responsive(stall);
}

TEST(JobController, FailureCarriesTheMessageAndTheQueueGoesOn)
{
    JobController jobs;
    QString message;
    bool second = false;
    QObject::connect(&jobs, &JobController::failed, [&](int, const QString& m) { message = m; });
    jobs.submit("bad", [](const ProgressFn&) -> std::function<void()> {
        throw embedlab::InputError("model.safetensors: truncated");
    });
    jobs.submit("good", [&](const ProgressFn&) -> std::function<void()> { return [&] { second = true; }; });
    run_until([&] { return second; });
    EXPECT_EQ(message, "model.safetensors: truncated");
}

// A job's freed memory goes back to the system when the job ends: blocks under
// glibc's mmap threshold (a 16-bit model's converted weights) would otherwise stay
// in the engine thread's arena, and the next job's model would come on top.
TEST(JobController, MemoryAJobFreedIsReturnedWhenItEnds)
{
    auto resident_mb = [] {
        std::ifstream statm("/proc/self/statm");
        long pages = 0, resident = 0;
        statm >> pages >> resident;
        return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1e6;
    };
    JobController jobs;
    bool finished = false;
    QObject::connect(&jobs, &JobController::finished, [&](int, double) { finished = true; });
    double while_held = 0;
    const double before = resident_mb();
    jobs.submit("churn", [&](const ProgressFn&) -> std::function<void()> {
        std::free(std::malloc(16 << 20)); // glibc's mmap threshold rises to 16 MB
        // Each block followed by a small one that outlives it, as a model's weights
        // sit between longer-lived allocations: the freed blocks are holes, not the
        // top of the heap that glibc would trim by itself.
        std::vector<char*> blocks, pins;
        for (int i = 0; i < 50; ++i) {
            blocks.push_back(static_cast<char*>(std::malloc(8 << 20)));
            std::memset(blocks.back(), 1, 8 << 20);
            pins.push_back(static_cast<char*>(std::malloc(64)));
        }
        while_held = resident_mb();
        for (char* b : blocks)
            std::free(b);
        return [pins] {
            for (char* p : pins)
                std::free(p);
        };
    });
    run_until([&] { return finished; });
    ASSERT_GT(while_held, before + 350) << "the blocks were not resident; the test measures nothing";
    EXPECT_LT(resident_mb(), before + 100) << "held " << while_held << " MB, " << before << " MB before";
}

TEST(JobController, CancelStopsTheRunningJobAndDropsQueuedOnes)
{
    JobController jobs;
    std::vector<int> cancelled;
    bool delivered = false;
    QObject::connect(&jobs, &JobController::cancelled, [&](int id) { cancelled.push_back(id); });
    const int running = jobs.submit("long", [&](const ProgressFn& progress) -> std::function<void()> {
        busy(60000, progress); // only a cancel ends it in time
        return [&] { delivered = true; };
    });
    const int queued = jobs.submit(
        "never", [&](const ProgressFn&) -> std::function<void()> { return [&] { delivered = true; }; });
    jobs.cancel(queued);
    QTimer::singleShot(200, [&] { jobs.cancel(running); });
    run_until([&] { return cancelled.size() == 2; }, 10000);
    EXPECT_EQ(cancelled, (std::vector<int>{queued, running}));
    EXPECT_FALSE(delivered);
    EXPECT_TRUE(jobs.idle());
}

TEST(MainWindow, OpensTheBundledModelAndFillsTheViewsWithoutStalling)
{
    embedlab::app::MainWindow window;
    const double stall =
        open_and_analyse(window, QString::fromStdString(embedlab::app::default_model()), 120000);
    EXPECT_EQ(window.spectrumView()->data().eigenvalues.size(), 128);
    EXPECT_EQ(window.spectrumView()->rank(), 32);
    EXPECT_NEAR(window.spectrumView()->data().explained.back(), 1.0, 1e-9);
    const auto& alloc = window.allocationView()->data();
    EXPECT_EQ(alloc.normalised.size(), 4);
    EXPECT_EQ(alloc.allocations.size(), 19);
    EXPECT_EQ(alloc.d_head, 32);
    std::printf("loading and analysing: the GUI thread at most %.0f ms on end working or waiting for a core; "
                "longest gap between ticks %.0f ms\n",
                stall, last_stall.gap_ms);
    expect_responsive(stall);
}

// Issue 21 item 5, on a model of users' size (a benchmark people run, not CI's:
// EMBEDLAB_GUI_SCALE_MODEL=DIR, e.g. synth --like qwen2.5-0.5b): loading, the
// analyses and every tab's lazy job leave the event loop responsive.
TEST(MainWindow, StaysResponsiveOnALargeModel)
{
    const char* model = std::getenv("EMBEDLAB_GUI_SCALE_MODEL");
    if (!model)
        GTEST_SKIP() << "set EMBEDLAB_GUI_SCALE_MODEL to a large model directory to measure";
    embedlab::app::MainWindow window;
    QElapsedTimer clock;
    clock.start();
    double worst_gap = 0;
    auto report = [&](const char* step, double stall) {
        worst_gap = std::max(worst_gap, last_stall.gap_ms);
        std::printf(
            "%s: %.1f s, application's worst stall %.0f ms; longest gap %.0f ms (GUI thread on a core "
            "%.0f ms, waiting for one %.0f ms)\n",
            step, clock.elapsed() / 1000.0, stall, last_stall.gap_ms, last_stall.on_cpu_ms,
            last_stall.runnable_ms);
    };
    double worst = open_and_analyse(window, QString::fromUtf8(model), 1800000);
    report("load and analyses", worst);
    for (const QString& tab : embedlab::app::MainWindow::viewNames()) {
        clock.restart();
        ASSERT_TRUE(window.showView(tab)) << tab.toStdString();
        const double stall = run_until([&] { return window.jobs().idle(); }, 1800000);
        report(("tab " + tab.toStdString()).c_str(), stall);
        worst = std::max(worst, stall);
    }
    const auto slowest = window.jobs().slowestDelivery();
    std::printf("slowest result on the GUI thread: %s, %.0f ms\n", slowest.name.toStdString().c_str(),
                slowest.ms);
    EXPECT_LT(worst, 100.0) << "the GUI thread worked or waited for a core " << worst << " ms on end";
    EXPECT_LT(worst_gap, 250.0) << "event loop stalled " << worst_gap << " ms";
}

// Every architecture of the zoo opens, and its spectrum and FLAT-LLM allocation
// views fill with its own sizes (d, head_dim).
TEST(MainWindow, OpensEveryZooArchitecture)
{
    const auto zoo = std::filesystem::path(EMBEDLAB_SOURCE_DIR) / ".." / "shared" / "models" / "zoo";
    if (!std::filesystem::exists(zoo))
        GTEST_SKIP() << "needs ../shared test data (not found at " << zoo << ")";
    embedlab::app::MainWindow window;
    for (const char* name :
         {"smollm2-tied", "llama32-ropescaled", "qwen2", "qwen3", "gemma2", "phi3", "gptneox"}) {
        SCOPED_TRACE(name);
        bool shown = false, ok = false;
        const auto connection =
            QObject::connect(&window, &embedlab::app::MainWindow::modelShown, [&](bool good) {
                ok = good;
                shown = true;
            });
        const auto dir = zoo / name;
        window.openModel(QString::fromStdString(dir.string()));
        run_until([&] { return shown && window.jobs().idle(); }, 120000);
        QObject::disconnect(connection);
        ASSERT_TRUE(ok);
        std::ifstream config_file(dir / "config.json");
        const auto config = nlohmann::json::parse(config_file);
        const int64_t d = config.at("hidden_size"), heads = config.at("num_attention_heads");
        const int64_t head_dim = config.value("head_dim", d / heads);
        EXPECT_EQ(static_cast<int64_t>(window.spectrumView()->data().eigenvalues.size()), d);
        EXPECT_EQ(window.allocationView()->data().d_head, head_dim);
        EXPECT_EQ(static_cast<int64_t>(window.allocationView()->data().normalised.size()),
                  config.at("num_hidden_layers").get<int64_t>());
    }
}

// Issue 23 item 3: a model that does not load fails its job (red, the error's text
// under it and in the status bar); the loaded model stays, and the title names it.
TEST(MainWindow, AFailedLoadIsMarkedFailedAndTheLoadedModelStaysNamed)
{
    using embedlab::app::MainWindow;
    MainWindow window;
    bool shown = false, ok = false;
    QObject::connect(&window, &MainWindow::modelShown, [&](bool good) {
        ok = good;
        shown = true;
    });
    window.openModel(QString::fromStdString(embedlab::app::default_model()));
    run_until([&] { return shown && window.jobs().idle(); }, 120000);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(window.windowTitle().startsWith("tinygpt2-f16")) << window.windowTitle().toStdString();

    shown = false;
    window.openModel("/nonexistent/embedlab-model");
    run_until([&] { return shown && window.jobs().idle(); }, 60000);
    EXPECT_FALSE(ok);
    auto* jobs = window.findChild<QTreeWidget*>("job_list");
    ASSERT_NE(jobs, nullptr);
    QTreeWidgetItem* load = jobs->topLevelItem(jobs->topLevelItemCount() - 1);
    ASSERT_TRUE(load->text(0).contains("nonexistent"));
    EXPECT_EQ(load->text(1), "failed");
    EXPECT_EQ(load->foreground(1).color(), QColor(176, 0, 0));
    ASSERT_EQ(load->childCount(), 1);
    EXPECT_TRUE(load->child(0)->text(0).contains("/nonexistent/embedlab-model"))
        << load->child(0)->text(0).toStdString();
    EXPECT_TRUE(window.statusBar()->currentMessage().startsWith("Failed: "));
    EXPECT_TRUE(window.windowTitle().startsWith("tinygpt2-f16")) << "the title names the model still loaded";
    EXPECT_EQ(window.spectrumView()->data().eigenvalues.size(), 128) << "the loaded model's views stay";
}

// Issue 23 item 4: a newly loaded model starts from empty tabs and controls within
// its own ranges (the Fourier ids of a 50k vocabulary do not carry over to 512).
TEST(MainWindow, ANewModelResetsEveryTabAndClampsItsControls)
{
    using embedlab::app::MainWindow;
    MainWindow window;
    bool shown = false;
    QObject::connect(&window, &MainWindow::modelShown, [&](bool) { shown = true; });
    window.openModel(QString::fromStdString(embedlab::app::default_model()));
    run_until([&] { return shown && window.jobs().idle(); }, 120000);
    auto* first = window.findChild<QSpinBox*>("fourier_first");
    ASSERT_NE(first, nullptr);
    first->setValue(40000);
    window.showView("fourier");
    run_until([&] { return window.jobs().idle(); }, 120000);
    ASSERT_EQ(window.fourierView()->data().first, 40000);

    // Issue 41 item 1: an id beyond the vocabulary typed and Returned stays as typed,
    // is said beside the box and is not plotted (not as 6000 nor anything else).
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    window.activateWindow();
    embedlab::test::type_number(first, "60000");
    embedlab::test::press_key(first, Qt::Key_Return);
    EXPECT_EQ(first->text(), "ids from 60000");
    QLabel* why = nullptr;
    for (auto* label : first->parentWidget()->findChildren<QLabel*>())
        if (label->isVisible() && label->text().contains("60000"))
            why = label;
    ASSERT_NE(why, nullptr) << "the reason is beside the box";
    EXPECT_EQ(why->text(), "Not updated while ids from 60000 is outside 0..50255.");
    QPushButton* update = nullptr;
    for (auto* b : first->parentWidget()->findChildren<QPushButton*>())
        if (b->text() == "Update")
            update = b;
    ASSERT_NE(update, nullptr);
    update->click();
    EXPECT_TRUE(window.jobs().idle()) << "nothing is queued";
    EXPECT_EQ(window.fourierView()->data().first, 40000);
    first->setValue(40000); // a valid value set again clears it
    EXPECT_FALSE(why->isVisible());

    // At the moment the new model is shown, nothing of the old one is left.
    int64_t fourier_left = -1, spectrum_left = -1;
    QObject::connect(&window, &MainWindow::modelShown, [&](bool) {
        fourier_left = static_cast<int64_t>(window.fourierView()->data().matrices.size());
        spectrum_left = static_cast<int64_t>(window.spectrumView()->data().eigenvalues.size());
    });
    shown = false;
    window.openModel(QString(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf");
    run_until([&] { return shown && window.jobs().idle(); }, 120000);
    EXPECT_EQ(fourier_left, 0);
    EXPECT_EQ(spectrum_left, 0);
    EXPECT_EQ(first->maximum(), 510) << "stories260K: 512 tokens";
    // Issue 41 item 3: the range starts again at the first ids that fit, 0..min(256, V),
    // not at the old start clamped to the last two ids.
    auto* count = window.findChild<QSpinBox*>("fourier_count");
    ASSERT_NE(count, nullptr);
    EXPECT_EQ(first->value(), 0);
    EXPECT_EQ(count->value(), 256);
    // The Fourier tab (shown) is recomputed for the new model, within its vocabulary.
    const auto& f = window.fourierView()->data();
    EXPECT_EQ(f.first, 0);
    EXPECT_EQ(f.count, 256);
    ASSERT_FALSE(f.matrices.empty());
    EXPECT_EQ(f.matrices[0].values.size(), 256 * 64);
    EXPECT_EQ(f.matrices[0].neighbour.size(), 255) << "a cosine for every neighbouring pair";
    EXPECT_EQ(window.spectrumView()->data().eigenvalues.size(), 64);
}

// A dragged model directory or .gguf/.bin file opens; other drops are refused.
TEST(MainWindow, DroppingAModelOpensIt)
{
    using embedlab::app::MainWindow;
    QTemporaryDir dir;
    QFile notes(dir.filePath("notes.txt"));
    ASSERT_TRUE(notes.open(QIODevice::WriteOnly));
    notes.close();
    const QString gguf = QString(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf";
    QMimeData web, text, mixed;
    web.setUrls({QUrl("https://example.com/model.gguf")});
    text.setUrls({QUrl::fromLocalFile(notes.fileName())});
    mixed.setUrls({QUrl::fromLocalFile(notes.fileName()), QUrl::fromLocalFile(gguf)});
    EXPECT_EQ(MainWindow::droppedModel(&web), "");
    EXPECT_EQ(MainWindow::droppedModel(&text), "");
    EXPECT_EQ(MainWindow::droppedModel(&mixed), QFileInfo(gguf).absoluteFilePath());
    QMimeData folder;
    folder.setUrls({QUrl::fromLocalFile(dir.path())});
    EXPECT_EQ(MainWindow::droppedModel(&folder), QFileInfo(dir.path()).absoluteFilePath());

    MainWindow window;
    bool shown = false;
    QObject::connect(&window, &MainWindow::modelShown, [&](bool ok) { shown = ok; });
    // Enter first: Qt delivers the drop to the widget that accepted the enter.
    QDragEnterEvent refused(QPoint(10, 10), Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&window, &refused);
    EXPECT_FALSE(refused.isAccepted()) << "a text file is not a model";
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mixed, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&window, &enter);
    EXPECT_TRUE(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mixed, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&window, &drop);
    EXPECT_TRUE(drop.isAccepted());
    run_until([&] { return shown && window.jobs().idle(); }, 120000);
    EXPECT_EQ(window.spectrumView()->data().eigenvalues.size(), 64) << "stories260K: d = 64";
}

// The panel gives back every field it was given, per method (each page keeps its
// values), shows only the chosen method's options, and remembers the choice for
// the next window. Its methods are the registry's it has a page for.
TEST(MethodPanel, HoldsEveryMethodsParametersAndRemembersThem)
{
    using embedlab::CompressionRequest;
    using embedlab::request_json;
    using embedlab::app::MethodPanel;
    QStringList registry;
    for (const auto& m : embedlab::method_registry())
        registry << m.name;
    QStringList offered = registry;
    offered.removeIf([](const QString& m) { return !MethodPanel::methods().contains(m); });
    EXPECT_EQ(MethodPanel::methods(), offered) << "registry methods, in the registry's order";
    for (const char* m : {"pca", "svd", "tt", "lle", "fourier", "quant", "flat"})
        EXPECT_TRUE(MethodPanel::methods().contains(m)) << m;
    const std::string train = "/data/train.txt", eval = "/data/eval.txt";
    const std::vector<CompressionRequest> want{
        {.method = "pca",
         .rank = 12,
         .lora_rank = 4,
         .lora_steps = 25,
         .train_text = train,
         .eval_text = eval},
        {.method = "tt",
         .eps = 0.25,
         .lora_rank = 4,
         .lora_steps = 25,
         .train_text = train,
         .eval_text = eval},
        {.method = "fourier",
         .mlp = "geglu",
         .steps = 40,
         .lora_rank = 4,
         .lora_steps = 25,
         .train_text = train,
         .eval_text = eval},
        {.method = "flat",
         .remaining = 0.35,
         .allocation = "uniform",
         .calib_text = "/data/cal.txt",
         .samples = 16,
         .seqlen = 64,
         .eval_text = eval},
        {.method = "lle",
         .freq_text = "/data/freq.txt",
         .keep_ratio = 0.3,
         .k = 6,
         .lora_rank = 4,
         .lora_steps = 25,
         .train_text = train,
         .eval_text = eval},
        {.method = "quant", .type = "q5_0", .eval_text = eval},
    };
    const embedlab::app::RunTarget pi{.host = "pi@raspberrypi",
                                      .ssh_config = "/home/me/.ssh/config",
                                      .remote_cli = "/opt/embedlab/bin/embedlab-cli"};
    std::optional<PanelState> initial;
    {
        MethodPanel panel;
        initial.emplace(panel);
        panel.setDimension(128);
        for (const auto& r : want) {
            panel.setRequest(r);
            EXPECT_EQ(request_json(panel.request()).dump(), request_json(r).dump()) << r.method;
        }
        for (const auto& r : want) // every page kept its values
            EXPECT_EQ(request_json(panel.request(QString::fromStdString(r.method))).dump(),
                      request_json(r).dump());
        panel.setTarget(pi);
        EXPECT_EQ(embedlab::app::target_json(panel.target()).dump(), embedlab::app::target_json(pi).dump());
        // flat has no LoRA recovery: the request says so whatever the checkbox holds.
        panel.setMethod("flat");
        EXPECT_EQ(panel.request().lora_rank, 0);
        // The quant types whose blocks do not divide d cannot be chosen: on d = 128 the K-types.
        const auto* types = panel.findChild<QComboBox*>("type"); // quant's field
        ASSERT_NE(types, nullptr);
        const auto* items = qobject_cast<QStandardItemModel*>(types->model());
        for (int i = 0; i < types->count(); ++i)
            EXPECT_EQ(items->item(i)->isEnabled(), !types->itemText(i).endsWith("_k"))
                << types->itemText(i).toStdString();
        panel.setDimension(256);
        EXPECT_TRUE(items->item(types->findText("q4_k"))->isEnabled());
        panel.setDimension(128);
        // The rank range follows the model.
        panel.setMethod("pca");
        panel.setRank(500);
        EXPECT_EQ(panel.rank(), 128);
        panel.setHost("");
        EXPECT_TRUE(panel.target().local()) << "this computer";
        panel.setHost("pi@raspberrypi");
    } // saved here
    MethodPanel again;
    const auto got = again.request();
    EXPECT_EQ(got.method, "pca");
    EXPECT_EQ(got.rank, 128);
    EXPECT_EQ(got.lora_rank, 4);
    EXPECT_EQ(got.train_text, train);
    EXPECT_EQ(got.eval_text, eval);
    EXPECT_DOUBLE_EQ(again.request("lle").keep_ratio, 0.3);
    EXPECT_EQ(again.request("lle").freq_text, "/data/freq.txt");
    EXPECT_EQ(again.request("flat").allocation, "uniform");
    EXPECT_EQ(again.request("fourier").mlp, "geglu");
    EXPECT_EQ(again.target().host, "pi@raspberrypi");
    EXPECT_EQ(again.target().remote_cli, pi.remote_cli);
    // An empty text box is the bundled sample text, named in the request.
    again.setRequest({.method = "pca", .rank = 32, .eval_text = embedlab::app::default_sample_text()});
    EXPECT_EQ(again.request().eval_text, embedlab::app::default_sample_text());
    initial->restore(again); // leave the workbench's defaults for later tests
}

// Issue 37: the panel's settings as the version before requests wrote them (one
// "method/..." key per box, "" texts meaning the bundled sample text) are read
// once; the panel then saves each method's request.
TEST(MethodPanel, ReadsTheSettingsOfTheVersionBeforeRequests)
{
    using embedlab::app::MethodPanel;
    std::optional<PanelState> initial;
    {
        MethodPanel panel;
        initial.emplace(panel);
    }
    {
        QSettings s;
        s.beginGroup("method");
        s.remove(""); // the group as the old version left it
        const std::vector<std::pair<QString, QVariant>> old{{"method", "flat"},
                                                            {"rank", 20},
                                                            {"eps", 0.5},
                                                            {"keep_ratio", 0.4},
                                                            {"k", 5},
                                                            {"mlp", "geglu"},
                                                            {"steps", 50},
                                                            {"remaining", 0.45},
                                                            {"allocation", "uniform"},
                                                            {"samples", 24},
                                                            {"seqlen", 96},
                                                            {"lora", true},
                                                            {"divergence", true},
                                                            {"task", "none"},
                                                            {"task_data", ""},
                                                            {"task_limit", 200},
                                                            {"lora_rank", 6},
                                                            {"lora_steps", 30},
                                                            {"frequency_text", "/data/freq.txt"},
                                                            {"calibration_text", ""},
                                                            {"train_text", ""},
                                                            {"eval_text", ""},
                                                            {"eval_tokens", 1024},
                                                            {"ssh_config", "/home/me/.ssh/config"},
                                                            {"remote_cli", ""},
                                                            {"slurm_partition", ""},
                                                            {"slurm_time", ""},
                                                            {"slurm_array_limit", 0},
                                                            {"hosts", QStringList{"pi@raspberrypi"}},
                                                            {"host", "pi@raspberrypi"}};
        for (const auto& [key, value] : old)
            s.setValue(key, value);
    }
    const std::string bundled = embedlab::app::default_sample_text();
    {
        MethodPanel panel;
        const auto flat = panel.request();
        EXPECT_EQ(flat.method, "flat");
        EXPECT_DOUBLE_EQ(flat.remaining, 0.45);
        EXPECT_EQ(flat.allocation, "uniform");
        EXPECT_EQ(flat.samples, 24);
        EXPECT_EQ(flat.seqlen, 96);
        EXPECT_EQ(flat.calib_text, bundled);
        EXPECT_EQ(flat.eval_text, bundled);
        EXPECT_EQ(flat.eval_tokens, 1024);
        EXPECT_TRUE(flat.divergence);
        const auto pca = panel.request("pca");
        EXPECT_EQ(pca.rank, 20);
        EXPECT_EQ(pca.lora_rank, 6);
        EXPECT_EQ(pca.lora_steps, 30);
        EXPECT_EQ(pca.train_text, bundled);
        EXPECT_DOUBLE_EQ(panel.request("tt").eps, 0.5);
        EXPECT_EQ(panel.request("lle").freq_text, "/data/freq.txt");
        EXPECT_DOUBLE_EQ(panel.request("lle").keep_ratio, 0.4);
        EXPECT_EQ(panel.request("lle").k, 5);
        EXPECT_EQ(panel.request("fourier").mlp, "geglu");
        EXPECT_EQ(panel.target().host, "pi@raspberrypi");
        EXPECT_EQ(panel.target().ssh_config, "/home/me/.ssh/config");
    } // saved as requests now
    EXPECT_TRUE(QSettings().contains("method/requests"));
    MethodPanel again;
    EXPECT_EQ(again.request("pca").rank, 20);
    EXPECT_EQ(again.request().method, "flat");
    initial->restore(again); // leave the next window as it was
}

int main(int argc, char** argv)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    // Settings (recent models, geometry) go to a scratch directory, not the user's.
    QTemporaryDir settings;
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings.path());
    QApplication::setOrganizationName("EmbedLabTest");
    QApplication::setApplicationName("test_app");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

// Issue 23 item 6: a number typed outside its range is refused in place (red
// frame, a red line naming the value and the range), never truncated and run.
TEST(MethodPanel, OutOfRangeNumbersAreRefusedInPlace)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    panel.setDimension(128);
    panel.setMethod("pca");
    panel.show();
    panel.activateWindow();
    const auto type = embedlab::test::type_number;
    bool ran = false;
    QObject::connect(&panel, &embedlab::app::MethodPanel::runRequested, [&] { ran = true; });
    auto* rank = panel.findChild<QSpinBox*>("rank");
    ASSERT_NE(rank, nullptr);
    type(rank, "500");
    panel.run();
    EXPECT_FALSE(ran) << "rank 500 of d = 128 must not run (as 50 or anything else)";
    EXPECT_EQ(panel.problem(), "rank k = 500 is outside 1..128");
    EXPECT_TRUE(rank->styleSheet().contains("#b00000"));
    bool said = false;
    for (auto* label : panel.findChildren<QLabel*>())
        said =
            said || (label->isVisible() && label->text() == "Not run while rank k = 500 is outside 1..128.");
    EXPECT_TRUE(said) << "the refusal is shown in the panel";

    type(rank, "64");
    EXPECT_EQ(panel.problem(), "");
    panel.run();
    EXPECT_TRUE(ran);
    EXPECT_EQ(panel.request().rank, 64);

    // The same for a real-valued box, and only while it is shown.
    panel.setMethod("tt");
    auto* eps = panel.findChild<QDoubleSpinBox*>("eps");
    ASSERT_NE(eps, nullptr);
    type(eps, "1.5");
    EXPECT_TRUE(panel.problem().startsWith("eps = 1")) << panel.problem().toStdString();
    ran = false;
    panel.run();
    EXPECT_FALSE(ran);
    panel.setMethod("pca");
    EXPECT_EQ(panel.problem(), "") << "a hidden box does not stop another method";
    initial.restore(panel); // saved on destruction: as it was
}

// Issue 41 item 1: Return and Tab keep an out-of-range number as typed (Qt would
// put back the last valid value, 50 of the typed 500, and run it): the box stays
// red, the reason is in the panel, Run refuses. Every number box of the panel is
// one of these boxes, named by the request field it fills.
TEST(MethodPanel, ReturnAndTabKeepAnOutOfRangeNumberAndRefuseTheRun)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    panel.setDimension(128);
    panel.setMethod("pca");
    panel.setAttribute(Qt::WA_DontShowOnScreen);
    panel.show();
    panel.activateWindow();
    bool ran = false;
    QObject::connect(&panel, &embedlab::app::MethodPanel::runRequested, [&] { ran = true; });
    auto* rank = panel.findChild<QSpinBox*>("rank");
    ASSERT_NE(rank, nullptr);
    QPushButton* run = nullptr;
    for (auto* b : panel.findChildren<QPushButton*>())
        if (b->text() == "Run")
            run = b;
    ASSERT_NE(run, nullptr);
    for (const int key : {Qt::Key_Return, Qt::Key_Tab}) {
        const char* name = key == Qt::Key_Return ? "Return" : "Tab";
        embedlab::test::type_number(rank, "500");
        embedlab::test::press_key(rank, key);
        EXPECT_EQ(rank->text(), "rank k = 500") << name << " keeps what was typed";
        EXPECT_EQ(panel.problem(), "rank k = 500 is outside 1..128") << name;
        EXPECT_TRUE(rank->styleSheet().contains("#b00000")) << name;
        bool said = false;
        for (auto* label : panel.findChildren<QLabel*>())
            said = said ||
                   (label->isVisible() && label->text() == "Not run while rank k = 500 is outside 1..128.");
        EXPECT_TRUE(said) << name << ": the reason is shown in the panel";
        run->click();
        EXPECT_FALSE(ran) << name << ": rank 500 of d = 128 must not run";
        embedlab::test::type_number(rank, "64");
        embedlab::test::press_key(rank, key);
        EXPECT_EQ(rank->text(), "rank k = 64") << name;
        EXPECT_EQ(panel.problem(), "") << name;
        EXPECT_FALSE(rank->styleSheet().contains("#b00000")) << name;
        run->click();
        EXPECT_TRUE(ran) << name;
        EXPECT_EQ(panel.request().rank, 64);
        ran = false;
    }
    // A real-valued box the same way.
    panel.setMethod("tt");
    auto* eps = panel.findChild<QDoubleSpinBox*>("eps");
    ASSERT_NE(eps, nullptr);
    embedlab::test::type_number(eps, "1.5");
    embedlab::test::press_key(eps, Qt::Key_Tab);
    EXPECT_EQ(eps->text(), "eps = 1.5");
    EXPECT_TRUE(panel.problem().startsWith("eps = 1.5 is outside")) << panel.problem().toStdString();
    run->click();
    EXPECT_FALSE(ran);
    eps->setValue(0.5);
    EXPECT_EQ(panel.problem(), "");
    // One validator: every number box is a checked box named by its request field.
    int boxes = 0;
    for (auto* box : panel.findChildren<QAbstractSpinBox*>()) {
        if (box->objectName() == "slurm_array_limit")
            continue; // the run target's, not the request's
        if (box->property("chain_step").isValid())
            continue; // a chain's trim step's (pipeline_request.hpp), not the request's
        ++boxes;
        EXPECT_TRUE(qobject_cast<embedlab::app::CheckedSpinBox*>(box) ||
                    qobject_cast<embedlab::app::CheckedDoubleSpinBox*>(box))
            << box->objectName().toStdString();
        const auto type = embedlab::request_field_type(box->objectName().toStdString()); // throws if unknown
        EXPECT_TRUE(type == embedlab::RequestFieldType::Integer ||
                    type == embedlab::RequestFieldType::Number);
    }
    EXPECT_GE(boxes, 13);
    initial.restore(panel);
}

// Issue 41 item 7: the window's shortcuts work while a text or spin field has focus.
// Under X11's key bindings a line edit claims Ctrl+E (end of line) before the
// shortcut map; the offscreen platform's bindings do not, so the field here claims
// it as it does there.
TEST(MainWindow, ShortcutsWorkWhileATextOrSpinFieldHasFocus)
{
    struct ClaimsCtrlE : QObject {
        bool eventFilter(QObject*, QEvent* e) override
        {
            if (e->type() == QEvent::ShortcutOverride) {
                auto* key = static_cast<QKeyEvent*>(e);
                if (key->key() == Qt::Key_E && key->modifiers() == Qt::ControlModifier) {
                    key->accept();
                    return true;
                }
            }
            return false;
        }
    };
    embedlab::app::MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.show();
    window.activateWindow();
    window.showView("results"); // the shortcut map needs the window active (below)
    // A plot with a point: Ctrl+E on an empty Results plot says there is nothing to
    // export instead of opening the dialog (EncoderWorkbench.CtrlEOnAnEmptyResultsPlot...).
    embedlab::RunSummary point;
    point.method = "pca";
    point.parameters = "rank 8";
    point.model = "shortcut-model";
    point.params_before = 100;
    point.params_after = 50;
    point.ratio = 0.5;
    point.ppl_original = 9;
    point.ppl = 10;
    point.delta_ln_ppl = 0.105;
    point.mean_cosine = 0.9;
    window.resultsView()->addRow(point);
    QLineEdit* text = nullptr;
    for (auto* e : window.methodPanel()->findChildren<QLineEdit*>())
        if (e->isVisible() && e->placeholderText() == "the bundled sample text")
            text = e;
    ASSERT_NE(text, nullptr);
    QSpinBox* spin = nullptr; // the evaluated tokens
    for (auto* box : window.methodPanel()->findChildren<QSpinBox*>())
        if (box->specialValueText() == "all tokens")
            spin = box;
    ASSERT_NE(spin, nullptr);
    for (QWidget* field : std::initializer_list<QWidget*>{text, spin}) {
        window.activateWindow(); // again after the dialog closed
        run_until([&] { return window.isActiveWindow(); }, 2000);
        field->setFocus();
        QWidget* focused = QApplication::focusWidget();
        ASSERT_NE(focused, nullptr);
        ClaimsCtrlE claims;
        focused->installEventFilter(&claims);
        const QString before = field == text ? text->text() : spin->text();
        bool opened = false;
        QTimer::singleShot(0, [&] {
            if (auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget())) {
                opened = true;
                dialog->reject();
            }
        });
        embedlab::test::press_key(focused, Qt::Key_E, Qt::ControlModifier, QString(QChar(5)));
        QApplication::processEvents();
        focused->removeEventFilter(&claims);
        EXPECT_TRUE(opened) << "Ctrl+E opens the figure export from a focused "
                            << focused->metaObject()->className();
        EXPECT_EQ(field == text ? text->text() : spin->text(), before) << "the key did not go into the field";
    }
}

// The Compare tab is text: File > Export figure says it has no figure instead of
// saving another tab's plot (it once fell through to the LLE graph).
TEST(MainWindow, ExportFigureOnTheCompareTabSaysThereIsNoFigure)
{
    embedlab::app::MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.show();
    ASSERT_TRUE(window.showView("compare"));
    EXPECT_EQ(window.currentPlot(), nullptr);
    bool opened = false;
    QTimer::singleShot(0, [&] {
        if (auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget())) {
            opened = true;
            dialog->reject();
        }
    });
    QAction* export_figure = nullptr;
    for (auto* action : window.findChildren<QAction*>())
        if (action->text().startsWith("Export &figure") || action->text().startsWith("Export figure"))
            export_figure = action;
    ASSERT_NE(export_figure, nullptr);
    export_figure->trigger();
    QApplication::processEvents();
    EXPECT_FALSE(opened) << "no export dialog for a tab without a plot";
    EXPECT_EQ(window.statusBar()->currentMessage(), "The Compare tab has no figure to export");
    ASSERT_TRUE(window.showView("results"));
    EXPECT_EQ(window.currentPlot(), window.resultsView()->plot());
}

// Issue 23 item 7: lle with the frequency text as the evaluation text is said
// (the rebuilt rare rows would hardly be evaluated), without stopping the run.
TEST(MethodPanel, WarnsWhenTheFrequencyTextIsTheEvaluationText)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    const std::string bundled = embedlab::app::default_sample_text();
    embedlab::CompressionRequest r{
        .method = "lle", .freq_text = bundled, .keep_ratio = 0.5, .k = 8, .eval_text = bundled};
    panel.setRequest(r); // both boxes empty: the bundled sample text for both
    EXPECT_TRUE(panel.note().startsWith("The frequency text is also the evaluation text"));
    r.freq_text = "/tmp/freq.txt";
    r.eval_text = "/tmp/eval.txt";
    panel.setRequest(r);
    EXPECT_EQ(panel.note(), "");
    r.eval_text = "/tmp/../tmp/freq.txt";
    panel.setRequest(r);
    EXPECT_NE(panel.note(), "");
    panel.setRequest({.method = "pca", .rank = 8, .eval_text = "/tmp/freq.txt"});
    EXPECT_EQ(panel.note(), "") << "only lle splits by frequency";
    // The panel saves its choice when destroyed: leave the next window what it had,
    // not texts that do not exist.
    initial.restore(panel);
}

// Issue 23 item 8: Cancel says "cancelling" at once (the engine stops at its next
// report), and the running job's time ticks even while no progress arrives.
TEST(MainWindow, CancelSaysCancellingAtOnceAndTheClockTicks)
{
    embedlab::app::MainWindow window;
    window.jobs().submit("quiet work", [](const ProgressFn& progress) -> std::function<void()> {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 20000) {
            QThread::msleep(20);
            if (t.elapsed() > 1500) // silent for the first 1.5 s, then reporting
                embedlab::report_progress(progress, 1, 2);
        }
        return [] {};
    });
    auto* jobs = window.findChild<QTreeWidget*>("job_list");
    ASSERT_NE(jobs, nullptr);
    QTreeWidgetItem* item = jobs->topLevelItem(jobs->topLevelItemCount() - 1);
    QElapsedTimer clock;
    clock.start();
    run_until([&] { return item->text(1) == "running"; }, 5000);
    run_until([&] { return item->text(3).endsWith(" s") && item->text(3) != "0.0 s"; }, 3000);
    EXPECT_LT(clock.elapsed(), 1500) << "the clock ticked before any progress arrived";
    // Cancel is in the job's right-click menu (issue 41 item 13).
    std::unique_ptr<QMenu> menu(window.jobList()->menuFor(item, nullptr));
    QAction* cancel = menu->actions().value(1);
    ASSERT_TRUE(cancel && cancel->text() == "Cancel" && cancel->isEnabled());
    cancel->trigger();
    EXPECT_EQ(item->text(1), "cancelling");
    run_until([&] { return item->text(1) == "cancelled"; }, 15000);
    EXPECT_EQ(item->text(1), "cancelled");
}

// Issue 22 item 4: the host choice offers a Slurm cluster, with partition, time
// and array limit, remembered for the next window.
TEST(MethodPanel, OffersASlurmClusterAndRemembersItsOptions)
{
    std::optional<PanelState> initial;
    {
        embedlab::app::MethodPanel panel;
        initial.emplace(panel);
        auto r = panel.request("pca");
        r.rank = 8;
        panel.setRequest(r);
        panel.setTarget(
            {.slurm = true, .slurm_partition = "cpu", .slurm_time = "00:30:00", .slurm_array_limit = 4});
        const auto back = panel.target();
        EXPECT_TRUE(back.slurm);
        EXPECT_EQ(back.host, "");
        EXPECT_EQ(back.slurm_partition, "cpu");
        EXPECT_EQ(back.slurm_time, "00:30:00");
        EXPECT_EQ(back.slurm_array_limit, 4);
        EXPECT_EQ(embedlab::app::describe_run(panel.request(), back), "pca rank 8 on Slurm");
    }
    {
        embedlab::app::MethodPanel again; // restored from the settings the first one saved
        const auto back = again.target();
        EXPECT_TRUE(back.slurm);
        EXPECT_EQ(back.slurm_partition, "cpu");
        EXPECT_EQ(back.slurm_time, "00:30:00");
        EXPECT_EQ(back.slurm_array_limit, 4);
        initial->restore(again); // leave the next window as it was
    }
}

// Issue 41 item 6: the Slurm fields show their whole placeholders and are checked
// before a run (a time sbatch would refuse is said in the panel, Run refuses), and
// an ssh host is added from the "on" list's "Add ssh host..." entry.
TEST(MethodPanel, SlurmFieldsAreCheckedAndAnSshHostIsAddedFromTheList)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    panel.setMethod("pca");
    panel.setTarget({.slurm = true});
    panel.setAttribute(Qt::WA_DontShowOnScreen);
    panel.resize(1400, 200);
    panel.show();
    panel.activateWindow();
    QApplication::processEvents();
    auto* partition = panel.findChild<QLineEdit*>("slurm_partition");
    auto* time = panel.findChild<QLineEdit*>("slurm_time");
    ASSERT_TRUE(partition && time);
    for (QLineEdit* e : {partition, time}) {
        ASSERT_TRUE(e->isVisible());
        EXPECT_GE(e->width(), e->fontMetrics().horizontalAdvance(e->placeholderText()) + 8)
            << "'" << e->placeholderText().toStdString() << "' is not cut off";
    }
    bool ran = false;
    QObject::connect(&panel, &embedlab::app::MethodPanel::runRequested, [&] { ran = true; });
    QPushButton* run = nullptr;
    for (auto* b : panel.findChildren<QPushButton*>())
        if (b->text() == "Run")
            run = b;
    ASSERT_NE(run, nullptr);
    auto type = [](QLineEdit* e, const QString& text) {
        e->setFocus();
        e->selectAll();
        for (QChar c : text) {
            const int key = c.isLetter()  ? Qt::Key_A + (c.toUpper().unicode() - 'A')
                            : c.isDigit() ? Qt::Key_0 + (c.unicode() - '0')
                            : c == ':'    ? Qt::Key_Colon
                                          : Qt::Key_Space;
            embedlab::test::press_key(e, key, Qt::NoModifier, QString(c));
        }
    };
    type(time, "half an hour");
    EXPECT_EQ(time->text(), "half an hour");
    run->click();
    EXPECT_FALSE(ran) << "a time sbatch refuses is not submitted";
    bool said = false;
    for (auto* label : panel.findChildren<QLabel*>())
        said =
            said || (label->isVisible() && label->text() == "Not run while the Slurm time limit 'half an "
                                                            "hour' is not minutes, HH:MM:SS or D-HH:MM:SS.");
    EXPECT_TRUE(said);
    type(time, "00:30:00");
    EXPECT_EQ(panel.problem(), "");
    run->click();
    EXPECT_TRUE(ran);
    EXPECT_EQ(panel.target().slurm_time, "00:30:00");

    QComboBox* on = nullptr;
    for (auto* c : panel.findChildren<QComboBox*>())
        if (c->findText("This computer") >= 0)
            on = c;
    ASSERT_NE(on, nullptr);
    const int add = on->findText("Add ssh host...");
    ASSERT_GE(add, 0) << "a visible entry to add a host";
    QTimer::singleShot(0, [] {
        if (auto* dialog = qobject_cast<QInputDialog*>(QApplication::activeModalWidget())) {
            dialog->setTextValue("pi@raspberrypi");
            dialog->accept();
        }
    });
    on->setCurrentIndex(add); // as choosing the entry does
    EXPECT_EQ(on->currentText(), "pi@raspberrypi");
    EXPECT_EQ(panel.target().host, "pi@raspberrypi");
    EXPECT_FALSE(panel.target().slurm);
    EXPECT_GE(on->findText("pi@raspberrypi"), 0);
    EXPECT_GT(on->findText("Add ssh host..."), on->findText("pi@raspberrypi")) << "the entry stays last";
    // Cancelled: the choice before stays.
    QTimer::singleShot(0, [] {
        if (auto* dialog = qobject_cast<QInputDialog*>(QApplication::activeModalWidget()))
            dialog->reject();
    });
    on->setCurrentIndex(on->findText("Add ssh host..."));
    EXPECT_EQ(panel.target().host, "pi@raspberrypi");
    initial.restore(panel);
}

// Issue 41 item 6: Slurm with no cluster says what is missing and how to start one,
// not sbatch's raw output.
TEST(MainWindow, SlurmWithoutAClusterSaysWhatIsMissing)
{
    QTemporaryDir dir;
    const QByteArray before = qgetenv("SLURM_CONF");
    qputenv("SLURM_CONF", (dir.path() + "/slurm.conf").toUtf8()); // no such file: no cluster
    embedlab::app::MainWindow window;
    window.setAskBeforeDiscarding(false);
    bool shown = false;
    QObject::connect(&window, &embedlab::app::MainWindow::modelShown, [&](bool) { shown = true; });
    window.openModel(QString(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf");
    run_until([&] { return shown && window.jobs().idle(); }, 120000);
    const int id =
        window.runCompression(embedlab::CompressionRequest{.method = "pca",
                                                           .rank = 8,
                                                           .eval_text = embedlab::app::default_sample_text(),
                                                           .eval_tokens = 256},
                              {.slurm = true});
    ASSERT_GT(id, 0);
    run_until([&] { return window.jobs().idle(); }, 120000);
    const QString said = window.statusBar()->currentMessage();
    EXPECT_TRUE(said.contains("Slurm: no cluster: SLURM_CONF names")) << said.toStdString();
    EXPECT_TRUE(said.contains("scripts/slurm-local.sh start")) << said.toStdString();
    EXPECT_FALSE(said.contains("fetch_config")) << said.toStdString();
    if (before.isNull())
        qunsetenv("SLURM_CONF");
    else
        qputenv("SLURM_CONF", before);
}

// Issue 23 item 13: File, Run, View and Help menus; the Jobs dock always reopens;
// About names the versions; shortcuts for run, cancel and export are listed.
TEST(MainWindow, MenusOfferRunViewHelpAndShortcuts)
{
    embedlab::app::MainWindow window;
    QStringList menus;
    for (QAction* a : window.menuBar()->actions())
        menus << a->text();
    EXPECT_EQ(menus, (QStringList{"&File", "&Edit", "&Run", "&View", "&Help"})); // Edit: undo (issue 41)
    auto* dock = window.findChild<QDockWidget*>("jobs");
    ASSERT_NE(dock, nullptr);
    QAction* toggle = dock->toggleViewAction();
    EXPECT_EQ(toggle->shortcut(), QKeySequence("Ctrl+J"));
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    dock->close();
    EXPECT_FALSE(dock->isVisible());
    toggle->trigger();
    EXPECT_TRUE(dock->isVisible());
    EXPECT_TRUE(window.aboutText().contains("libtorch")) << window.aboutText().toStdString();
    EXPECT_TRUE(window.aboutText().contains("No model loaded"));
    const QString keys = window.shortcutsText();
    for (const char* action : {"Run compression", "Cancel running job", "Export compressed model...", "Jobs",
                               "Export data (CSV)...", "Undo"})
        EXPECT_TRUE(keys.contains(action)) << action << " in\n" << keys.toStdString();
    // Run with no model: said, nothing queued.
    for (QAction* menu : window.menuBar()->actions())
        for (QAction* a : menu->menu()->actions())
            if (a->text() == "&Run compression")
                a->trigger();
    EXPECT_EQ(window.statusBar()->currentMessage(), "Open a model first");
    EXPECT_TRUE(window.jobs().idle());
}

// Issue 19 item 5: the task choice (none, SST-2 dev from ../shared, an SST-2 file,
// a multiple-choice file) and its limit travel in the request, and back.
// Issue 36 item 3: the GUI offers flat's decoder target as compress does, and the
// engine's request compresses the MLPs with it unless "dense MLP" is ticked.
TEST(MethodPanel, OffersFlatsTargetRatio)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    auto r = panel.request("flat");
    r.remaining = 0;
    r.target_ratio = 0.8;
    panel.setRequest(r);
    auto got = panel.request();
    EXPECT_DOUBLE_EQ(got.target_ratio, 0.8);
    EXPECT_FALSE(got.no_mlp);
    EXPECT_EQ(got.remaining, 0);
    EXPECT_TRUE(embedlab::request_compresses_mlp(got));
    EXPECT_NO_THROW(embedlab::check_request(got));
    r.no_mlp = true;
    panel.setRequest(r);
    EXPECT_FALSE(embedlab::request_compresses_mlp(panel.request()));
    r.target_ratio = 0; // no target: the remaining ratio, as before
    r.no_mlp = false;
    r.remaining = 0.5;
    panel.setRequest(r);
    got = panel.request();
    EXPECT_DOUBLE_EQ(got.remaining, 0.5);
    EXPECT_EQ(got.target_ratio, 0);
    EXPECT_FALSE(got.no_mlp);
    initial.restore(panel); // saved on destruction: as it was
}

// A classifier's GLUE task chosen as a user does (the combo by keyboard, the file typed,
// Return): the request carries it and the engine's request check accepts it.
TEST(MethodPanel, GlueTaskOfAClassifierIsChosenAndCarried)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    panel.setRequest({.method = "pca", .rank = 8, .eval_text = embedlab::app::default_sample_text()});
    panel.show();
    auto* combo = panel.findChild<QComboBox*>("task");
    ASSERT_NE(combo, nullptr);
    combo->setFocus();
    const int rte = combo->findData("rte");
    ASSERT_GT(rte, 0);
    while (combo->currentIndex() < rte)
        embedlab::test::press_key(combo, Qt::Key_Down);
    EXPECT_EQ(combo->currentData().toString(), "rte");
    auto* file = panel.findChild<QLineEdit*>("task_data");
    ASSERT_NE(file, nullptr);
    EXPECT_TRUE(file->isVisibleTo(&panel)) << "a GLUE task reads its own file";
    file->setFocus();
    for (const QChar c : QString("/data/glue/RTE/dev.tsv"))
        embedlab::test::press_key(file, c.unicode(), Qt::NoModifier, QString(c));
    embedlab::test::press_key(file, Qt::Key_Return);
    const auto got = panel.request();
    EXPECT_EQ(got.task, "rte");
    EXPECT_EQ(got.task_data, "/data/glue/RTE/dev.tsv");
    EXPECT_NO_THROW(embedlab::check_request(got));
    // Set back from a request (a session), the choice is the same item.
    panel.setRequest(got);
    EXPECT_EQ(combo->currentData().toString(), "rte");
    initial.restore(panel);
}

TEST(MethodPanel, CarriesTheTaskChoiceInTheRequest)
{
    embedlab::app::MethodPanel panel;
    const PanelState initial(panel);
    embedlab::CompressionRequest r{
        .method = "pca", .rank = 8, .eval_text = embedlab::app::default_sample_text()};
    panel.setRequest(r);
    EXPECT_TRUE(panel.request().task.empty()) << "no task unless chosen";
    EXPECT_EQ(panel.request().task_limit, 0);
    r.task = "mc";
    r.task_data = "/data/piqa.jsonl";
    r.task_limit = 50;
    panel.setRequest(r);
    auto got = panel.request();
    EXPECT_EQ(got.task, "mc");
    EXPECT_EQ(got.task_data, "/data/piqa.jsonl");
    EXPECT_EQ(got.task_limit, 50);
    // The engine's request (the job schema) accepts it as it is.
    EXPECT_NO_THROW(embedlab::check_request(got));
    const QString dev = embedlab::app::MethodPanel::sst2DevPath();
    if (embedlab::test::have_shared()) {
        EXPECT_TRUE(dev.endsWith("data/glue/SST-2/dev.tsv")) << dev.toStdString();
        r.task = "sst2";
        r.task_data = dev.toStdString();
        panel.setRequest(r);
        got = panel.request();
        EXPECT_EQ(got.task, "sst2");
        EXPECT_EQ(got.task_data, dev.toStdString()) << "the SST-2 dev choice names the shared file";
    }
    initial.restore(panel); // saved on destruction: as it was
}
