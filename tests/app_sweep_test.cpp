// Issue 41 item 11: sweeps from the window. A number field of the method panel takes
// a list or a range as typed ("8:24:8"); Run queues ONE job whose runs each add their
// results row as they end; a bad sweep keeps its text, is marked and said beside the
// box, and queues nothing; a cancel stops the remaining runs; on Slurm the sweep is
// one job array (a fake sbatch here, which runs the tasks itself: no cluster).
//
// libtorch before Qt (brief).
#include "embedlab/sweep_list.hpp"

#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTimer>
#include <QTreeWidget>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <optional>

#include "analyses.hpp"
#include "checked_spin_box.hpp"
#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "results_view.hpp"
#include "workbench_support.hpp"

using embedlab::app::CheckedSpinBox;
using embedlab::app::MainWindow;
using embedlab::app::MethodPanel;
using embedlab::test::press_key;
using embedlab::test::wait_for;

namespace {

using embedlab::test::open_bundled;

// Types `text` over a box's number as a user does, key by key.
void type_text(QAbstractSpinBox* box, const QString& text)
{
    box->setFocus();
    box->selectAll();
    for (QChar c : text) {
        const int key = c.isDigit()    ? Qt::Key_0 + (c.unicode() - '0')
                        : c.isLetter() ? Qt::Key_A + (c.toUpper().unicode() - 'A')
                        : c == ':'     ? Qt::Key_Colon
                        : c == ','     ? Qt::Key_Comma
                        : c == '.'     ? Qt::Key_Period
                                       : Qt::Key_Space;
        press_key(box, key, Qt::NoModifier, QString(c));
    }
}

// Return, then Tab out of the box: both keep a sweep's text.
void commit(QAbstractSpinBox* box)
{
    press_key(box, Qt::Key_Return);
    press_key(box, Qt::Key_Tab);
}

// A visible red line in the panel saying `what`.
bool said_beside(const MethodPanel& panel, const QString& what)
{
    for (auto* label : panel.findChildren<QLabel*>())
        if (label->isVisible() && label->text().startsWith("Not run while ") && label->text().contains(what))
            return true;
    return false;
}

// Quick, deterministic runs: pca on the bundled model, 256 evaluated tokens.
void choose_quick_pca(MethodPanel& panel)
{
    panel.setRequest({.method = "pca", .rank = 8, .eval_tokens = 256});
}

} // namespace

// The shared grammar (engine sweep_list.hpp), as the CLI's sweep reads it too.
TEST(Sweep, ListsAndRangesExpandAndEveryValueIsChecked)
{
    using embedlab::sweep_integers;
    using embedlab::sweep_numbers;
    EXPECT_EQ(sweep_integers("8:24:8", 1, 128, "rank"), (std::vector<int64_t>{8, 16, 24}));
    EXPECT_EQ(sweep_integers("8:30:8", 1, 128, "rank"),
              (std::vector<int64_t>{8, 16, 24})); // stop not reached
    EXPECT_EQ(sweep_integers("4,8:10", 1, 128, "rank"), (std::vector<int64_t>{4, 8, 9, 10}));
    EXPECT_EQ(sweep_numbers("0.1:0.3:0.1", 0, 1, "eps"), (std::vector<double>{0.1, 0.2, 0.3}));
    const auto refused = [](const char* text) {
        try {
            sweep_integers(text, 1, 128, "rank k =");
        } catch (const embedlab::InputError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(refused("8:500:8"), "rank k = 8:500:8: 136 is outside 1..128");
    EXPECT_EQ(refused("8:4"), "rank k = 8:4: the range 8:4 ends before it starts");
    EXPECT_EQ(refused("8:16:0"), "rank k = 8:16:0: the range 8:16:0 needs a positive step");
    EXPECT_EQ(refused("a:b").rfind("rank k = a:b: 'a' is not an integer", 0), 0u) << refused("a:b");
    EXPECT_EQ(refused("8,,16"), "rank k = 8,,16: an empty value between commas");
    EXPECT_EQ(refused("1:1000"), "rank k = has more than 256 values; give at most 256");
}

// Typed into the rank box (Return, Tab), Run queues one job whose three runs add the
// rows of ranks 8, 16 and 24 in order, each as it ends; each row keeps its own request.
TEST(Sweep, ARangeTypedIntoTheRankBoxRunsOneRowPerValue)
{
    MainWindow window;
    window.show();
    open_bundled(window);
    auto* panel = window.methodPanel();
    choose_quick_pca(*panel);
    window.showView("results");
    auto* rank = panel->findChild<CheckedSpinBox*>("rank");
    auto* run = panel->findChild<QPushButton*>("run");
    ASSERT_TRUE(rank && run);
    type_text(rank, "8:24:8");
    commit(rank);
    EXPECT_EQ(rank->text(), "rank k = 8:24:8") << "the sweep stays as typed";
    EXPECT_EQ(rank->problem(), "");
    EXPECT_EQ(rank->sweep(), (QList<double>{8, 16, 24}));
    EXPECT_EQ(panel->problem(), "");
    EXPECT_EQ(run->text(), "Run 3") << "the Run button counts the sweep's runs";
    EXPECT_TRUE(rank->toolTip().contains("8, 16, 24")) << rank->toolTip().toStdString();
    // As drawn: framed in blue, and wide enough for the whole sweep.
    QApplication::processEvents();
    const QImage drawn = rank->grab().toImage();
    EXPECT_EQ(drawn.pixelColor(1, drawn.height() / 2), QColor("#2060c0"));
    EXPECT_GE(rank->width(), rank->fontMetrics().horizontalAdvance(rank->text()) + 16);

    int queued = 0, job = -1;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::queued, [&](int id, const QString&) {
        ++queued;
        job = id;
    });
    auto* results = window.resultsView();
    // Rows arrive while the sweep's job still runs (row by row, not at its end).
    std::map<size_t, bool> running_at_row; // rows in the table -> the sweep still running
    QObject::connect(results->table()->model(), &QAbstractItemModel::rowsInserted,
                     [&] { running_at_row[results->rows().size()] = window.jobs().running() == job; });
    auto* jobs = window.findChild<QTreeWidget*>("job_list");
    ASSERT_NE(jobs, nullptr);
    QSet<QString> states; // the job list's state column while it runs: "2/3: pca rank 16"
    run->click();
    EXPECT_EQ(queued, 1) << "a sweep is ONE job";
    ASSERT_TRUE(wait_for([&] {
        for (int i = 0; i < jobs->topLevelItemCount(); ++i)
            for (int c = 0; c < jobs->columnCount(); ++c)
                if (QRegularExpression("^\\d/3: pca rank").match(jobs->topLevelItem(i)->text(c)).hasMatch())
                    states.insert(jobs->topLevelItem(i)->text(c));
        return window.jobs().idle();
    }));
    const auto& rows = results->rows();
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].parameters, "rank 8");
    EXPECT_EQ(rows[1].parameters, "rank 16");
    EXPECT_EQ(rows[2].parameters, "rank 24");
    EXPECT_LT(rows[0].ratio, rows[1].ratio);
    EXPECT_LT(rows[1].ratio, rows[2].ratio);
    EXPECT_TRUE(running_at_row[1] && running_at_row[2]) << "the first rows came while the sweep still ran";
    EXPECT_FALSE(states.isEmpty()) << "the job list says which run of the three";
    // Each row copies as its own single run.
    for (int i = 0; i < 3; ++i) {
        const QString command = window.rowText(i, MainWindow::RowText::Command);
        EXPECT_TRUE(command.contains(QString("--method pca --rank %1 ").arg(8 * (i + 1))))
            << command.toStdString();
    }

    // A bad sweep in the same window: kept, said beside the box, nothing queued.
    type_text(rank, "8:4");
    commit(rank);
    EXPECT_EQ(rank->text(), "rank k = 8:4");
    run->click();
    EXPECT_EQ(queued, 1);
    EXPECT_TRUE(said_beside(*panel, "rank k = 8:4: the range 8:4 ends before it starts"));
    EXPECT_EQ(run->text(), "Run");
}

// Each bad sweep keeps its text, is marked (red, the reason as tooltip and beside the
// boxes) and Run emits nothing; the same box then takes a good one again.
TEST(Sweep, ABadSweepKeepsItsTextSaysWhyAndRunsNothing)
{
    MethodPanel panel;
    panel.show();
    choose_quick_pca(panel);
    panel.setDimension(128); // the bundled model's d: rank 1..128
    bool ran = false;
    QObject::connect(&panel, &MethodPanel::runRequested, [&] { ran = true; });
    auto* rank = panel.findChild<CheckedSpinBox*>("rank");
    auto* run = panel.findChild<QPushButton*>("run");
    ASSERT_TRUE(rank && run);
    for (const auto& [typed, why] : std::vector<std::pair<QString, QString>>{
             {"8:500:8", "rank k = 8:500:8: 136 is outside 1..128"},
             {"8:4", "rank k = 8:4: the range 8:4 ends before it starts"},
             {"a:b", "rank k = a:b: 'a' is not an integer"}}) {
        type_text(rank, typed);
        commit(rank);
        EXPECT_EQ(rank->text(), "rank k = " + typed) << "the text stays as typed";
        EXPECT_TRUE(rank->problem().startsWith(why)) << rank->problem().toStdString();
        QApplication::processEvents();
        const QImage drawn = rank->grab().toImage();
        EXPECT_EQ(drawn.pixelColor(1, drawn.height() / 2), QColor("#b00000"))
            << typed.toStdString() << " is framed in red";
        EXPECT_TRUE(rank->toolTip().startsWith(why)) << rank->toolTip().toStdString();
        EXPECT_TRUE(panel.requests().empty() || panel.requests().size() == 1);
        run->click();
        EXPECT_FALSE(ran) << typed.toStdString();
        EXPECT_TRUE(said_beside(panel, why)) << typed.toStdString();
        EXPECT_EQ(rank->value(), 8) << "value() keeps the last single number";
    }
    // A list is a sweep too; a single number again is one run.
    type_text(rank, "4,16,32");
    commit(rank);
    EXPECT_EQ(panel.problem(), "");
    EXPECT_EQ(rank->styleSheet().contains("#2060c0"), true) << "a valid sweep is framed in blue";
    ASSERT_EQ(panel.requests().size(), 3u);
    EXPECT_EQ(panel.requests()[2].rank, 32);
    type_text(rank, "12");
    commit(rank);
    EXPECT_EQ(rank->text(), "rank k = 12");
    EXPECT_EQ(rank->styleSheet(), "");
    ASSERT_EQ(panel.requests().size(), 1u);
    EXPECT_EQ(panel.requests()[0].rank, 12);
    run->click();
    EXPECT_TRUE(ran);
}

// More than 64 runs asks first: Cancel queues nothing, Yes queues them. Two swept
// fields are every combination, the first field slowest.
TEST(Sweep, ALargeSweepAsksFirstAndTwoFieldsAreEveryCombination)
{
    MethodPanel panel;
    panel.show();
    panel.setRequest({.method = "lle", .keep_ratio = 0.5, .k = 4, .eval_tokens = 256});
    panel.setDimension(128);
    int ran = 0;
    QObject::connect(&panel, &MethodPanel::runRequested, [&] { ++ran; });
    auto* keep = panel.findChild<QDoubleSpinBox*>("keep_ratio");
    auto* k = panel.findChild<QSpinBox*>("k");
    ASSERT_TRUE(keep && k);
    type_text(keep, "0.2:0.6:0.2");
    commit(keep);
    type_text(k, "4,8");
    commit(k);
    const auto requests = panel.requests();
    ASSERT_EQ(requests.size(), 6u);
    EXPECT_DOUBLE_EQ(requests[0].keep_ratio, 0.2);
    EXPECT_EQ(requests[0].k, 4);
    EXPECT_EQ(requests[1].k, 8);
    EXPECT_DOUBLE_EQ(requests[2].keep_ratio, 0.4);
    EXPECT_DOUBLE_EQ(requests[5].keep_ratio, 0.6);
    EXPECT_EQ(requests[5].k, 8);

    type_text(k, "1:30"); // 3 x 30 = 90 runs
    commit(k);
    ASSERT_EQ(panel.sweepSize(), 90);
    const auto answer = [&](QMessageBox::StandardButton button) {
        QTimer::singleShot(0, [button] {
            if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget()))
                box->button(button)->click();
        });
    };
    answer(QMessageBox::Cancel);
    panel.run();
    EXPECT_EQ(ran, 0) << "cancelled: nothing queued";
    answer(QMessageBox::Yes);
    panel.run();
    EXPECT_EQ(ran, 1);
}

// The sweep's one cancel stops the runs not yet done; the rows already added stay.
TEST(Sweep, CancelStopsTheRemainingRuns)
{
    MainWindow window;
    open_bundled(window);
    auto* panel = window.methodPanel();
    choose_quick_pca(*panel);
    auto* rank = panel->findChild<CheckedSpinBox*>("rank");
    type_text(rank, "4:64:4"); // 16 runs
    commit(rank);
    ASSERT_EQ(rank->text(), "rank k = 4:64:4");
    ASSERT_EQ(panel->sweepSize(), 16);
    int job = -1;
    bool cancelled = false;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::queued,
                     [&](int id, const QString&) { job = id; });
    QObject::connect(&window.jobs(), &embedlab::app::JobController::cancelled,
                     [&](int id) { cancelled = id == job; });
    panel->run();
    auto* results = window.resultsView();
    ASSERT_TRUE(wait_for([&] { return !results->rows().empty(); }));
    window.cancelJob(job);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_TRUE(cancelled);
    const size_t rows = results->rows().size();
    EXPECT_GE(rows, 1u);
    EXPECT_LE(rows, 3u) << "the runs after the cancel did not run";
    wait_for([] { return false; }, 300); // nothing more arrives
    EXPECT_EQ(results->rows().size(), rows);
}

// On Slurm the sweep is ONE array of all its runs. A fake sbatch (on PATH) records
// its arguments and runs each task's batch script itself, as a node would; squeue
// has nothing queued, so each task's state is read from its events, as on a cluster.
TEST(Sweep, OnSlurmTheSweepIsOneJobArray)
{
    namespace fs = std::filesystem;
    const embedlab::test::FakeSlurm slurm;
    const fs::path log = slurm.log();

    MainWindow window;
    open_bundled(window);
    auto* panel = window.methodPanel();
    panel->setRequest({.method = "pca", .rank = 8, .eval_tokens = 64}); // each task is a worker process
    panel->setTarget({.slurm = true});
    auto* rank = panel->findChild<CheckedSpinBox*>("rank");
    type_text(rank, "8,16");
    commit(rank);
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    panel->findChild<QPushButton*>("run")->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }, 60000));
    EXPECT_TRUE(failure.isEmpty()) << failure.toStdString();
    std::ifstream in(log);
    std::vector<std::string> calls;
    for (std::string line; std::getline(in, line);)
        calls.push_back(line);
    ASSERT_EQ(calls.size(), 1u) << "one sbatch for the whole sweep";
    EXPECT_NE(calls[0].find("--array=0-1 "), std::string::npos) << calls[0];
    const auto& rows = window.resultsView()->rows();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].parameters, "rank 8");
    EXPECT_EQ(rows[1].parameters, "rank 16");
    EXPECT_TRUE(std::isfinite(rows[1].ppl) && rows[1].ppl > 1);
    EXPECT_TRUE(window.rowText(1, MainWindow::RowText::Command).contains("--rank 16 "));
    EXPECT_TRUE(fs::is_empty(slurm.sweeps())) << "the numbers are in the rows: the array's directory is gone";
}
