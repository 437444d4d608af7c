// The results table's per-row records (app/result_rows.hpp): what each row came from
// (its request, its exportable source, its chain) moves with the row when a row is
// deleted, the delete undone or redone, and a session reopened. A window with rows of
// three kinds (a reopened run, a chain run here, a run here) deletes the middle one and
// undoes it: every row copies its own command and is exportable as its kind is. A chain's
// row exports by running its pipeline again, the same files as its copied command writes.
//
// libtorch before Qt (brief).
#include "embedlab/pipeline_request.hpp"

#include <QAction>
#include <QApplication>
#include <QStatusBar>
#include <QTemporaryDir>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <sstream>

#include "cli_support.hpp"
#include "gui_test_support.hpp"
#include "job_controller.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "result_rows.hpp"
#include "results_view.hpp"
#include "test_support.hpp"
#include "workbench_support.hpp"

using embedlab::app::MainWindow;
using embedlab::app::ResultRow;
using embedlab::app::ResultRows;
using embedlab::test::wait_for;

namespace {

using Json = nlohmann::ordered_json;

// A record naming `tag` in each field it has: a run's request (method `tag`), a chain.
ResultRow rows_record(const std::string& tag, bool request, bool source, bool chain)
{
    ResultRow r;
    if (request)
        r.request = embedlab::CompressionRequest{.method = tag};
    if (source)
        r.source = embedlab::app::RowSource{QString::fromStdString(tag), {.method = tag}};
    if (chain)
        r.chain = Json{{"chain", tag}};
    return r;
}

// The tags a record holds ("-" for an empty field), e.g. "pca pca -".
std::string rows_tags(const ResultRow* r)
{
    if (!r)
        return "none";
    return (r->request ? r->request->method : "-") + " " + (r->source ? r->source->request.method : "-") +
           " " + (r->chain ? (*r->chain)["chain"].get<std::string>() : "-");
}

// Every row's tags, one string per row of `rows` up to `n`.
std::vector<std::string> rows_all(const ResultRows& rows, int n)
{
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i)
        out.push_back(rows_tags(rows.find(i)));
    return out;
}

// What the window says of row `row`: its copied command, and whether Export applies.
struct RowsSeen {
    QString command;
    bool exportable = false;
    bool operator==(const RowsSeen&) const = default;
};

void PrintTo(const RowsSeen& seen, std::ostream* os)
{
    *os << (seen.exportable ? "[exportable] " : "[not exportable] ") << seen.command.toStdString();
}

QAction* rows_export_action(MainWindow& window)
{
    for (QAction* a : window.findChildren<QAction*>())
        if (a->text().remove('&') == "Export compressed model...")
            return a;
    return nullptr;
}

std::vector<RowsSeen> rows_seen(MainWindow& window)
{
    std::vector<RowsSeen> seen;
    QAction* export_model = rows_export_action(window);
    EXPECT_NE(export_model, nullptr);
    for (int row = 0; row < static_cast<int>(window.resultsView()->rows().size()); ++row) {
        window.resultsView()->selectRow(-1); // a change of selection, whatever was selected
        window.resultsView()->selectRow(row);
        QApplication::processEvents();
        seen.push_back(
            {window.rowText(row, MainWindow::RowText::Command), export_model && export_model->isEnabled()});
    }
    return seen;
}

std::string rows_describe(const std::vector<RowsSeen>& seen)
{
    std::string out;
    for (const auto& s : seen) {
        std::ostringstream line;
        PrintTo(s, &line);
        out += line.str() + "\n";
    }
    return out;
}

// The bytes of a file ("" if none).
std::string rows_bytes(const std::filesystem::path& p)
{
    return std::filesystem::exists(p) ? embedlab::test::read_text(p) : std::string();
}

} // namespace

TEST(ResultRows, TakeMovesLaterRowsDownAndInsertMovesThemBackUp)
{
    ResultRows rows;
    EXPECT_EQ(rows.size(), 0);
    EXPECT_EQ(rows.find(0), nullptr);
    EXPECT_EQ(rows.find(-1), nullptr);
    rows.at(0) = rows_record("a", true, false, false); // reopened: a request alone
    rows.at(1) = rows_record("b", false, false, true); // a chain
    rows.at(3) = rows_record("d", true, true, false);  // a run here; row 2 has no record
    ASSERT_EQ(rows.size(), 4);
    EXPECT_EQ(rows_all(rows, 5), (std::vector<std::string>{"a - -", "- - b", "- - -", "d d -", "none"}));

    ResultRow taken = rows.take(1);
    EXPECT_EQ(rows_tags(&taken), "- - b");
    EXPECT_EQ(rows.size(), 3);
    EXPECT_EQ(rows_all(rows, 4), (std::vector<std::string>{"a - -", "- - -", "d d -", "none"}));
    rows.insert(1, std::move(taken));
    EXPECT_EQ(rows_all(rows, 5), (std::vector<std::string>{"a - -", "- - b", "- - -", "d d -", "none"}));

    // The first and the last row, taken and put back in the reverse order (undo's).
    ResultRow first = rows.take(0);
    ResultRow last = rows.take(2);
    EXPECT_EQ(rows_tags(&first), "a - -");
    EXPECT_EQ(rows_tags(&last), "d d -");
    EXPECT_EQ(rows_all(rows, 3), (std::vector<std::string>{"- - b", "- - -", "none"}));
    rows.insert(2, std::move(last));
    rows.insert(0, std::move(first));
    EXPECT_EQ(rows_all(rows, 4), (std::vector<std::string>{"a - -", "- - b", "- - -", "d d -"}));
}

TEST(ResultRows, RowsPastTheRecordsAreEmptyAndMoveNothing)
{
    ResultRows rows;
    rows.at(0) = rows_record("a", true, true, true);
    // A row the window has no record for (a reopened row without a request, after the last).
    EXPECT_EQ(rows_tags(&rows.at(2)), "- - -");
    EXPECT_EQ(rows.size(), 3);
    const ResultRow none = rows.take(7);
    EXPECT_EQ(rows_tags(&none), "- - -");
    EXPECT_EQ(rows.size(), 3);
    const ResultRow before_first = rows.take(-1);
    EXPECT_EQ(rows_tags(&before_first), "- - -");
    // Put back past the end: the rows between are empty, the others stay.
    rows.insert(5, rows_record("f", false, false, true));
    EXPECT_EQ(rows_all(rows, 7),
              (std::vector<std::string>{"a a a", "- - -", "- - -", "- - -", "- - -", "- - f", "none"}));
    rows.insert(-1, rows_record("g", true, false, false)); // no row: nothing moves
    EXPECT_EQ(rows.size(), 6);
    // Every field of a record moves with it, and exportable() follows its kind.
    ResultRow all = rows.take(0);
    EXPECT_EQ(rows_tags(&all), "a a a");
    EXPECT_TRUE(all.exportable());
    EXPECT_FALSE(rows_record("c", false, false, true).exportable()); // a chain not run here
    ResultRow chain_here = rows_record("c", false, false, true);
    chain_here.chain_exportable = true;
    EXPECT_TRUE(chain_here.exportable());
    EXPECT_FALSE(rows_record("r", true, false, false).exportable()); // a reopened or remote run
    rows.clear();
    EXPECT_EQ(rows.size(), 0);
    EXPECT_EQ(rows.find(0), nullptr);
}

// Rows of three kinds: row 0 reopened from a session (its request only: copies, does not
// export), row 1 a chain run here (copies its --then line, exports by running again), row 2
// a run here (copies, exports). Deleting row 1 moves row 2's record with it; undoing puts
// each back; so do two deletes undone, a redo, and a session saved and reopened.
TEST(WorkbenchRows, ADeletedRowsUndoGivesEveryRowBackItsOwnRequestChainAndExport)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    window.showView("results");
    embedlab::test::open_bundled(window);
    window.methodPanel()->setTarget({}); // this computer, whatever an earlier test left chosen
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    auto* results = window.resultsView();
    embedlab::test::TempDir dir;

    // Row 0: a run, saved in a session and reopened.
    auto pca8 = window.methodPanel()->request("pca");
    pca8.rank = 8;
    pca8.eval_tokens = 256;
    ASSERT_GT(window.runCompression(pca8), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 1) << failure.toStdString();
    const QString first = QString::fromStdString((dir / "first.embedlab").string());
    ASSERT_TRUE(window.saveSession(first)) << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(window.openSession(first)) << window.statusBar()->currentMessage().toStdString();
    ASSERT_EQ(results->rows().size(), 1);

    // Row 1: a chain (trim, then pca rank 4, stored as q8_0) run here.
    const embedlab::test::TextSlices texts(20000, 3000);
    const Json chain = {{"eval_text", texts.eval},
                        {"pipeline",
                         {{{"method", "trim"}, {"freq_text", texts.fit}, {"coverage", 0.9}},
                          {{"method", "pca"}, {"rank", 4}, {"store", "q8_0"}}}}};
    ASSERT_GT(window.runChain(chain), 0) << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 2) << failure.toStdString();
    EXPECT_EQ(results->rows()[1].method, "chain");

    // Row 2: another run here.
    auto pca12 = pca8;
    pca12.rank = 12;
    ASSERT_GT(window.runCompression(pca12), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 3) << failure.toStdString();

    const std::vector<RowsSeen> before = rows_seen(window);
    ASSERT_EQ(before.size(), 3);
    EXPECT_TRUE(before[0].command.contains("--method pca") && before[0].command.contains("--rank 8"))
        << rows_describe(before);
    EXPECT_FALSE(before[0].exportable) << "a reopened row's model is not in memory";
    EXPECT_TRUE(before[1].command.contains("--method trim") && before[1].command.contains("--then pca") &&
                before[1].command.contains("--rank 4"))
        << rows_describe(before);
    EXPECT_TRUE(before[1].exportable) << "a chain run here exports by running again";
    EXPECT_TRUE(before[2].command.contains("--rank 12") && !before[2].command.contains("--then"))
        << rows_describe(before);
    EXPECT_TRUE(before[2].exportable);

    // The chain deleted: the run after it is row 1 now, with its own command and export.
    results->removeRow(1);
    QApplication::processEvents();
    const std::vector<RowsSeen> deleted = rows_seen(window);
    EXPECT_EQ(deleted, (std::vector<RowsSeen>{before[0], before[2]})) << rows_describe(deleted);
    EXPECT_EQ(window.rowText(2, MainWindow::RowText::Command), QString());
    EXPECT_EQ(window.exportCompressed(2, QString::fromStdString((dir / "none").string()), false, false), -1);

    // Undone: each row its own again.
    QAction* undo = results->undoStack()->createUndoAction(&window);
    QAction* redo = results->undoStack()->createRedoAction(&window);
    undo->trigger();
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), before) << rows_describe(rows_seen(window));

    // Two rows deleted (the first twice), undone one at a time; then a redo and its undo.
    results->removeRow(0);
    results->removeRow(0);
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), (std::vector<RowsSeen>{before[2]})) << rows_describe(rows_seen(window));
    undo->trigger();
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), (std::vector<RowsSeen>{before[1], before[2]}))
        << rows_describe(rows_seen(window));
    undo->trigger();
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), before) << rows_describe(rows_seen(window));
    redo->trigger();
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), (std::vector<RowsSeen>{before[1], before[2]}))
        << rows_describe(rows_seen(window));
    undo->trigger();
    QApplication::processEvents();
    EXPECT_EQ(rows_seen(window), before) << rows_describe(rows_seen(window));

    // Saved and reopened: every row copies its own command; none is in memory to export.
    const QString second = QString::fromStdString((dir / "second.embedlab").string());
    ASSERT_TRUE(window.saveSession(second)) << window.statusBar()->currentMessage().toStdString();
    MainWindow other;
    other.setAskBeforeDiscarding(false);
    ASSERT_TRUE(other.openSession(second)) << other.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(wait_for([&] { return other.jobs().idle(); }));
    std::vector<RowsSeen> reopened = before;
    for (auto& r : reopened)
        r.exportable = false;
    EXPECT_EQ(rows_seen(other), reopened) << rows_describe(rows_seen(other));
}

// Export on a chain's row: a job (progress, cancel) running the chain's pipeline into the
// chosen directory, the same files as the row's copied command writes with the CLI.
TEST(WorkbenchRows, AChainsRowExportsWhatItsCopiedCommandWrites)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    embedlab::test::open_bundled(window);
    window.methodPanel()->setTarget({});
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    const embedlab::test::TextSlices texts(20000, 3000);
    const Json chain = {{"eval_text", texts.eval},
                        {"pipeline",
                         {{{"method", "trim"}, {"freq_text", texts.fit}, {"coverage", 0.9}},
                          {{"method", "pca"}, {"rank", 4}, {"store", "q8_0"}}}}};
    ASSERT_GT(window.runChain(chain), 0) << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_FALSE(window.resultsView()->rows().empty()) << failure.toStdString();
    const int row = static_cast<int>(window.resultsView()->rows().size()) - 1;
    ASSERT_EQ(window.resultsView()->rows()[static_cast<size_t>(row)].method, "chain");

    // Cancelled as it starts: nothing written.
    embedlab::test::TempDir dir;
    std::vector<int> cancelled;
    bool cancel_next = true;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::started, [&](int id) {
        if (std::exchange(cancel_next, false))
            window.jobs().cancel(id);
    });
    QObject::connect(&window.jobs(), &embedlab::app::JobController::cancelled,
                     [&](int id) { cancelled.push_back(id); });
    const auto out = dir / "exported";
    const int job = window.exportCompressed(row, QString::fromStdString(out.string()), false, false);
    ASSERT_GT(job, 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_EQ(cancelled, std::vector<int>{job});
    EXPECT_FALSE(std::filesystem::exists(out));

    // Exported: the chain's model, as the copied command writes it.
    failure.clear();
    ASSERT_GT(window.exportCompressed(row, QString::fromStdString(out.string()), false, false), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_TRUE(failure.isEmpty()) << failure.toStdString();
    EXPECT_TRUE(
        window.statusBar()->currentMessage().startsWith("Wrote " + QString::fromStdString(out.string())))
        << window.statusBar()->currentMessage().toStdString();
    std::string line = window.rowText(row, MainWindow::RowText::Command).toStdString();
    ASSERT_EQ(line.rfind("embedlab-cli ", 0), 0u) << line;
    line.replace(0, std::string("embedlab-cli").size(), embedlab::test::quote(EMBEDLAB_CLI_PATH));
    const auto by_cli = dir / "cli";
    std::filesystem::create_directories(by_cli);
    const std::string run = "cd " + embedlab::test::quote(by_cli.string()) + " && " + line + " --quiet >" +
                            embedlab::test::quote((dir / "printed.txt").string()) + " 2>&1 </dev/null";
    ASSERT_EQ(std::system(run.c_str()), 0) << run << "\n" << rows_bytes(dir / "printed.txt");
    std::filesystem::path written;
    for (const auto& entry : std::filesystem::directory_iterator(by_cli))
        written = entry.path();
    ASSERT_FALSE(written.empty()) << "the CLI wrote nothing in " << by_cli;
    for (const char* file : {"model.safetensors", "config.json"}) {
        const std::string exported = rows_bytes(out / file);
        EXPECT_FALSE(exported.empty()) << file;
        EXPECT_TRUE(exported == rows_bytes(written / file)) << file << " differs from the CLI's";
    }
    const Json manifest = Json::parse(rows_bytes(out / "embedlab.json"), nullptr, false);
    ASSERT_TRUE(manifest.is_object());
    EXPECT_EQ(manifest.value("method", ""), "pca");

    // A taken name is refused (the job fails, the directory stays), as a run's row's export.
    failure.clear();
    ASSERT_GT(window.exportCompressed(row, QString::fromStdString(out.string()), false, false), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_TRUE(failure.contains("already exists")) << failure.toStdString();
    EXPECT_TRUE(std::filesystem::exists(out / "embedlab.json"));
}
