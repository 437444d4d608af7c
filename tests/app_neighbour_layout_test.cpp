// Issue 41 item 9: the neighbour map's t-SNE runs as a job on the engine thread
// with the parameters the user set, and comes back to the map (every token
// placed, the parameters said); the graph carries the text's frequencies.
#include "embedlab/experiment.hpp"

#include <QApplication>
#include <QComboBox>
#include <QPushButton>
#include <QSpinBox>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "analyses.hpp"
#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "neighbour_graph_view.hpp"

using embedlab::app::MainWindow;
using embedlab::test::press_key;
using embedlab::test::wait_for;

TEST(WorkbenchMap, TheTsneLayoutRunsAsAJobWithTheChosenParameters)
{
    MainWindow window;
    bool shown = false;
    QObject::connect(&window, &MainWindow::modelShown, [&](bool ok) { shown = ok; });
    window.openModel(QString::fromStdString(embedlab::app::default_model()));
    ASSERT_TRUE(wait_for([&] { return shown; }));
    window.showView("lle");
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    auto* view = window.neighbourView();
    const auto& g = view->data();
    ASSERT_EQ(g.x.size(), 50257);
    ASSERT_EQ(g.frequency.size(), 50257);
    double seen = 0;
    for (int id : g.common)
        seen += g.frequency[id];
    EXPECT_GT(seen, 100) << "the common tokens are the text's frequent ones";
    EXPECT_TRUE(view->colourChooser()->findText("frequency in the text") >= 0);

    for (const auto& [spin, text] : {std::pair<QSpinBox*, QString>{view->sampleSpin(), "600"},
                                     {view->iterationsSpin(), "250"},
                                     {view->seedSpin(), "3"}}) {
        embedlab::test::type_number(spin, text);
        press_key(spin, Qt::Key_Return);
    }
    QPushButton* run = nullptr;
    for (auto* b : view->findChildren<QPushButton*>())
        if (b->text() == "Compute t-SNE")
            run = b;
    ASSERT_NE(run, nullptr);
    run->click();
    ASSERT_TRUE(
        wait_for([&] { return window.jobs().idle() && view->layoutChooser()->currentIndex() == 1; }, 60000));
    EXPECT_EQ(view->shownX().size(), 50257);
    EXPECT_NE(view->shownX(), g.x);
    EXPECT_EQ(view->plot()->xAxis->label(), "t-SNE 1");
    const QString note = view->layoutNote();
    for (const char* says : {"over 600 sampled tokens", "first 50 principal components", "perplexity 30",
                             "250 iterations", "seed 3", "49657 of the 50257 tokens are placed"})
        EXPECT_TRUE(note.contains(says)) << says << ": " << note.toStdString();
}
