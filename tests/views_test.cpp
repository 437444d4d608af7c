// Views are fed plain structs; these tests check that what is drawn is what was given.
#include <QApplication>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "parameter_breakdown_chart.hpp"

using embedlab::views::ParameterBreakdownChart;
using embedlab::views::ParameterBreakdownData;

namespace {

QCPBars* barsAt(QCustomPlot* plot, int i) { return qobject_cast<QCPBars*>(plot->plottable(i)); }

TEST(ParameterBreakdownChart, DrawsEveryPartInMillionsWithTheHighlightSeparate)
{
    ParameterBreakdownChart chart;
    ParameterBreakdownData data;
    data.bars = {{"token embedding", 6432896}, {"attention", 264192}, {"MLP", 526336}};
    data.highlighted = 0;
    chart.setData(data);

    QCustomPlot* plot = chart.plot();
    ASSERT_EQ(plot->plottableCount(), 2);
    QCPBars* normal = barsAt(plot, 0);
    QCPBars* highlight = barsAt(plot, 1);
    ASSERT_EQ(highlight->data()->size(), 1);
    EXPECT_DOUBLE_EQ(highlight->data()->at(0)->key, 1.0);
    EXPECT_NEAR(highlight->data()->at(0)->value, 6.432896, 1e-9);
    ASSERT_EQ(normal->data()->size(), 2);
    EXPECT_NEAR(normal->data()->at(1)->value, 0.526336, 1e-9);
    EXPECT_GE(plot->yAxis->range().upper, 6.432896);
}

TEST(ParameterBreakdownChart, EmptyDataGivesAnEmptyButValidPlot)
{
    ParameterBreakdownChart chart;
    chart.setData({});
    EXPECT_EQ(barsAt(chart.plot(), 0)->data()->size(), 0);
    EXPECT_EQ(barsAt(chart.plot(), 1)->data()->size(), 0);
    EXPECT_GT(chart.plot()->yAxis->range().upper, 0);
}

} // namespace

int main(int argc, char** argv)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
