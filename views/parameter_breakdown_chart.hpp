// Bar chart of a model's parameters by part, one part highlighted (the token
// embedding, the part EmbedLab compresses).
#pragma once

#include <QString>
#include <QVector>

#include "plot_view.hpp"

class QCPBars;

namespace embedlab::views {

struct ParameterBar {
    QString label;
    double count = 0;
};

struct ParameterBreakdownData {
    QVector<ParameterBar> bars;
    int highlighted = -1; // index into bars, -1: none
};

class ParameterBreakdownChart : public DataPlotView<ParameterBreakdownData> {
    Q_OBJECT
public:
    explicit ParameterBreakdownChart(QWidget* parent = nullptr);

private:
    void draw() override;
    QCPBars* bars_;
    QCPBars* highlight_;
};

} // namespace embedlab::views
