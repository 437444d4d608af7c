// Bar chart of a model's parameters by part, one part highlighted (the token
// embedding, the part EmbedLab compresses).
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
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

class ParameterBreakdownChart : public QWidget {
    Q_OBJECT
public:
    explicit ParameterBreakdownChart(QWidget* parent = nullptr);
    void setData(const ParameterBreakdownData& data);
    const ParameterBreakdownData& data() const { return data_; }
    QCustomPlot* plot() const { return plot_; }

private:
    QCustomPlot* plot_;
    QCPBars* bars_;
    QCPBars* highlight_;
    ParameterBreakdownData data_;
};

} // namespace embedlab::views
